// CPU features (CPUID + XGETBV) and the choice of a kernel set (cpu_isa.h). Compiled for baseline
// x86-64: no instruction of a kernel set runs before its features were checked here.
#include <hddp/kernels/cpu_isa.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>

#include <hddp/kernels/check.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace hddp::detail {
namespace {

struct Features {
  bool avx2_fma = false, avx512 = false;
  bool avx512_bf16 = false;  // vdpbf16ps, vcvtne2ps2bf16
  bool amx_bf16 = false;     // AMX-TILE + AMX-BF16 with tile state in XCR0 (the OS still has to grant it)
};

#if defined(__x86_64__) || defined(__i386__)
// XCR0: which register state the OS saves on a context switch.
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

Features detect() {
  Features f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool fma = c & bit_FMA, osxsave = c & bit_OSXSAVE, avx = c & bit_AVX;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;           // SSE + AVX state
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;         // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2_fma = ymm_state && fma && (b & bit_AVX2);
  f.avx512 = f.avx2_fma && zmm_state && (b & bit_AVX512F);
  const bool tile_state = (xcr0 & 0x60000) == 0x60000;  // XTILECFG (17) + XTILEDATA (18)
  f.amx_bf16 = f.avx512 && tile_state && (d & (1u << 22)) && (d & (1u << 24));
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = f.avx512 && (a & (1u << 5));
  return f;
}
#else
Features detect() { return {}; }
#endif

const Features& features() {
  static const Features f = detect();
  return f;
}

}  // namespace

CpuModel cpu_model() {
  CpuModel m;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return m;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
  m.vendor = vendor;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return m;
  const int base_family = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
  m.family = base_family == 0xf ? base_family + ((a >> 20) & 0xff) : base_family;
  m.model = base_family == 0x6 || base_family == 0xf ? (((a >> 16) & 0xf) << 4) + base_model : base_model;
#endif
  return m;
}

std::string cpu_model_key() {
  const CpuModel m = cpu_model();
  std::string brand;
#if defined(__x86_64__) || defined(__i386__)
  unsigned regs[12] = {};
  if (__get_cpuid(0x80000000, &regs[0], &regs[1], &regs[2], &regs[3]) && regs[0] >= 0x80000004) {
    for (unsigned leaf = 0; leaf < 3; ++leaf)
      __get_cpuid(0x80000002 + leaf, &regs[4 * leaf], &regs[4 * leaf + 1], &regs[4 * leaf + 2], &regs[4 * leaf + 3]);
    char text[49] = {};
    std::memcpy(text, regs, 48);
    brand = text;
    const size_t first = brand.find_first_not_of(' '), last = brand.find_last_not_of(' ');
    brand = first == std::string::npos ? "" : brand.substr(first, last - first + 1);
  }
#endif
  char head[96];
  std::snprintf(head, sizeof head, "%s family %d model %d", m.vendor.empty() ? "unknown" : m.vendor.c_str(),
                m.family, m.model);
  return std::string(head) + ": " + (brand.empty() ? "unknown" : brand);
}

bool cpu_has_avx2_fma() { return features().avx2_fma; }
bool cpu_has_avx512() { return features().avx512; }
bool cpu_has_avx512_bf16() { return features().avx512_bf16; }
bool cpu_has_amx_bf16() { return features().amx_bf16; }

std::string amx_permission_error() {
  static const std::string why = []() -> std::string {
    if (!cpu_has_amx_bf16()) return "this CPU (or OS) lacks AMX-BF16 with tile state enabled";
#if defined(__linux__) && defined(__x86_64__)
    // Linux gives a process the AMX tile data state only on request (kernel 5.16+).
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return "";
    return std::string("Linux refused AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: ") + std::strerror(errno) +
           "; a kernel of 5.16 or later grants it)";
#else
    return "AMX needs Linux's arch_prctl permission on x86-64";
#endif
  }();
  return why;
}

std::string isa_unsupported_reason(const IsaFamily& f, const std::string& name) {
  const bool known = name == f.isas[0] || name == f.isas[1] || name == f.isas[2];
  HDDP_CHECK_ARG(known, "unknown " << f.what << " set '" << name << "' (" << f.env_var << "): expected " << f.isas[0]
                                   << ", " << f.isas[1] << " or " << f.isas[2]);
  if (name == "portable") return "";
  if (name == "avx2") return cpu_has_avx2_fma() ? "" : "this CPU (or OS) lacks AVX2+FMA";
  if (name == "avx512") return cpu_has_avx512() ? "" : "this CPU (or OS) lacks AVX-512F with ZMM state enabled";
  if (name == "avx512bf16") return cpu_has_avx512_bf16() ? "" : "this CPU (or OS) lacks AVX512_BF16";
  return amx_permission_error();  // "amx"
}

std::string isa_unsupported_reason(const std::string& name, const char* env_var) {
  for (const IsaFamily* f : {&kGemmIsa, &kGemmBf16Isa, &kConvIsa, &kElementwiseIsa, &kAttentionIsa})
    if (std::strcmp(f->env_var, env_var) == 0) return isa_unsupported_reason(*f, name);
  HDDP_CHECK_ARG(false, "no kernel family reads " << env_var);
}

std::string_view isa_widest(const IsaFamily& f) {
  for (std::string_view isa : f.isas)
    if (isa_unsupported_reason(f, std::string(isa)).empty()) return isa;
  return "portable";
}

std::string isa_choice(const IsaFamily& f) {
  if (const char* force = std::getenv(f.env_var); force && *force) {
    const std::string why = isa_unsupported_reason(f, force);
    HDDP_CHECK_ARG(why.empty(), f.env_var << "=" << force << ": " << why << "; unset it to use the best " << f.what
                                          << " this CPU has");
    return force;
  }
  return std::string(isa_widest(f));
}

}  // namespace hddp::detail

// faults_ckpt_tool: reads and patches training checkpoints for the fault tests (the shell
// tests have no python). Every patch keeps the rest of the file and re-seals the checksum, so
// the driver sees exactly one defect.
//
//   faults_ckpt_tool info FILE                  step, world size, identity (read_checkpoint)
//   faults_ckpt_tool set-version FILE N         header format version := N, re-sealed
//   faults_ckpt_tool set-meta-u64 FILE KEY N    u64 metadata entry KEY := N, re-sealed
//   faults_ckpt_tool reseal FILE                recompute the trailing checksum
// Exit 0 on success; 1 with a message otherwise (info: the loader's message).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include <hddp/core/checkpoint.h>
#include <hddp/core/serialize.h>
#include <hddp/core/util.h>

namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void spit_sealed(const std::string& p, std::string bytes) {
  if (bytes.size() < 8) throw std::runtime_error(p + ": too short to re-seal");
  const uint64_t h = hddp::fnv1a64(bytes.data(), bytes.size() - 8);
  std::memcpy(bytes.data() + bytes.size() - 8, &h, 8);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + p);
}

// Offset of metadata KEY's value: walks the (valid) file's descriptors.
size_t meta_value_offset(const std::string& b, const std::string& key, uint64_t* vlen) {
  uint32_t nt, nm;
  std::memcpy(&nt, b.data() + 20, 4);
  std::memcpy(&nm, b.data() + 24, 4);
  size_t pos = 32;
  for (uint32_t i = 0; i < nt; ++i) {
    uint32_t len;
    std::memcpy(&len, b.data() + pos, 4);
    pos += 4 + len + 16;
  }
  for (uint32_t i = 0; i < nm; ++i) {
    uint32_t len;
    std::memcpy(&len, b.data() + pos, 4);
    const std::string k = b.substr(pos + 4, len);
    pos += 4 + len;
    std::memcpy(vlen, b.data() + pos, 8);
    pos += 8;
    if (k == key) return pos;
    pos += *vlen;
  }
  throw std::runtime_error("no metadata entry '" + key + "'");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "info" && argc == 3) {
      const hddp::Checkpoint c = hddp::read_checkpoint(argv[2]);
      std::printf("step %lld\nworld_size %d\n", (long long)c.state.step, c.state.world_size);
      for (const auto& [k, v] : c.state.identity) std::printf("id.%s %s\n", k.c_str(), v.c_str());
      return 0;
    }
    if (cmd == "set-version" && argc == 4) {
      std::string b = slurp(argv[2]);
      const uint32_t v = uint32_t(std::stoul(argv[3]));
      std::memcpy(b.data() + 4, &v, 4);
      spit_sealed(argv[2], b);
      return 0;
    }
    if (cmd == "set-meta-u64" && argc == 5) {
      std::string b = slurp(argv[2]);
      uint64_t vlen = 0;
      const size_t off = meta_value_offset(b, argv[3], &vlen);
      if (vlen != 8) throw std::runtime_error(std::string("entry '") + argv[3] + "' is not one u64");
      const uint64_t v = std::stoull(argv[4]);
      std::memcpy(b.data() + off, &v, 8);
      spit_sealed(argv[2], b);
      return 0;
    }
    if (cmd == "reseal" && argc == 3) {
      spit_sealed(argv[2], slurp(argv[2]));
      return 0;
    }
    std::fprintf(stderr, "usage: %s info FILE | set-version FILE N | set-meta-u64 FILE KEY N | reseal FILE\n", argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faults_ckpt_tool: %s\n", e.what());
    return 1;
  }
}

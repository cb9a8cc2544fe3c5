// bf16_bits IN OUT: reads IN (raw float32 values), writes OUT (their bf16 bit patterns, raw
// uint16), through hddp::to_bf16 over the whole array (the vectorised, threaded path) and, as a
// second block appended to OUT, one value at a time (the scalar rule). For bf16_vs_torch.py.
#include <cstdio>
#include <vector>

#include <hddp/kernels/bf16.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bf16_bits IN OUT\n");
    return 2;
  }
  std::FILE* in = std::fopen(argv[1], "rb");
  if (!in) {
    std::perror(argv[1]);
    return 2;
  }
  std::vector<float> x;
  float v;
  while (std::fread(&v, 4, 1, in) == 1) x.push_back(v);
  std::fclose(in);
  std::vector<hddp::bf16> h(x.size()), s(x.size());
  hddp::to_bf16(int64_t(x.size()), x.data(), h.data());
  for (size_t i = 0; i < x.size(); ++i) s[i] = hddp::to_bf16(x[i]);
  std::FILE* out = std::fopen(argv[2], "wb");
  if (!out || std::fwrite(h.data(), 2, h.size(), out) != h.size() || std::fwrite(s.data(), 2, s.size(), out) != s.size() ||
      std::fclose(out) != 0) {
    std::perror(argv[2]);
    return 2;
  }
  return 0;
}

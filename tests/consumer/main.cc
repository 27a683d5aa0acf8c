// Rotates one head with RoPE and prints the ALiBi slopes: enough to prove headers and libraries link.
#include <posenc/posenc.h>

#include <cstdio>
#include <vector>

int main() {
  posenc::RopeConfig config;
  config.head_dim = 8;
  const posenc::Rope rope(config);
  std::vector<float> x = {1, 0, 0, 0, 0, 0, 0, 0};
  std::vector<int64_t> positions = {1};
  rope.forward(posenc::view(x.data(), {1, 1, 1, 8}), posenc::view(positions.data(), {1}));
  posenc::AlibiConfig alibi;
  alibi.heads = 8;
  std::printf("x0 = %.6f (cos 1 = 0.540302), first slope %.4f\n", x[0], posenc::alibi_slopes(alibi)[0]);
  return (x[0] > 0.5402f && x[0] < 0.5404f) ? 0 : 1;
}

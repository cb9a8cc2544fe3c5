#pragma once
// What the hddp::train suites share: the program's one mpi::Env (tests/train/train_main.cpp).
#include <hddp/distributed/mpi_env.h>

namespace hddp::testing {
mpi::Env& env();
}  // namespace hddp::testing

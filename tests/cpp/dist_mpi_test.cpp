// The mpi collective backend (tessera/dist/mpi.h) inside one process: every
// member is local, so the message exchange runs without MPI and can be
// compared with the local backend here; the tests under mpirun are in
// tests/python/test_dist_mpi.py. Also the process identity outside mpirun,
// the mesh-to-process map, and the failure modes (a failed member, a
// mismatch, a timeout with its flight record).
#include <gtest/gtest.h>

#include <cstdlib>

#include "tessera/dist/communicator.h"
#include "tessera/dist/mpi.h"
#include "tessera/dist/spmd.h"
#include "tessera/support/error.h"
#include "dist_test_util.h"

namespace tessera::dist {
namespace {

using test_util::cpus;
using test_util::error_of;

Tensor values(int seed, std::vector<std::int64_t> shape, const NumericsPolicy& p) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.37 * static_cast<double>((seed * 131 + i * 17) % 97) - 13.1;
  return Tensor::from_values(v, std::move(shape), p);
}

// Runs body(rank) on n threads; a rank that raises is failed in `comm`.
void spmd(Communicator& comm, const std::function<void(std::size_t)>& body) {
  run_spmd(comm.size(), body, [&](std::size_t r, const std::string& why) { comm.fail(r, why); });
}

std::vector<Tensor> on(Communicator& comm, const std::function<Tensor(std::size_t)>& call) {
  std::vector<Tensor> out(comm.size());
  spmd(comm, [&](std::size_t r) { out[r] = call(r); });
  return out;
}

TEST(DistMpi, OutsideMpirunThisIsProcessZeroOfOne) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) GTEST_SKIP() << "the tests run under mpirun";
  EXPECT_FALSE(launched_by_mpirun());
  EXPECT_EQ(process_rank(), 0);
  EXPECT_EQ(process_count(), 1);
  EXPECT_NE(mpi_info_lines().find("  mpi:         "), std::string::npos);
}

TEST(DistMpi, MeshRanksGoToProcessesInBlocks) {
  std::vector<int> owners;
  for (int r = 0; r < 8; ++r) owners.push_back(owner_of_mesh_rank(r, 8, 4));
  EXPECT_EQ(owners, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  const std::string e = error_of([] { owner_of_mesh_rank(0, 6, 4); }, ErrorCode::ArgumentInvalid);
  EXPECT_NE(e.find("a mesh of 6 devices cannot be spread over 4 MPI processes"), std::string::npos) << e;
}

TEST(DistMpi, EveryCollectiveGivesTheLocalBackendsBits) {
  const std::size_t n = 3;
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  const NumericsPolicy i32 = default_policy(DType::int32);
  std::vector<std::function<Tensor(Communicator&, std::size_t)>> calls = {
      [&](Communicator& c, std::size_t r) { return c.allreduce(r, values(int(r), {5, 7}, bf16), ReduceOp::sum); },
      [&](Communicator& c, std::size_t r) {
        return c.allreduce(r, values(int(r), {11}, bf16), ReduceOp::sum, Algorithm::tree);
      },
      [&](Communicator& c, std::size_t r) {
        return c.reduce_scatter(r, values(int(r), {4, 5}, i32), 1, ReduceOp::max, Algorithm::ring);
      },
      [&](Communicator& c, std::size_t r) {
        return c.all_gather(r, values(int(r), {2, static_cast<std::int64_t>(r) + 1}, bf16), 1);
      },
      [&](Communicator& c, std::size_t r) { return c.all_to_all(r, values(int(r), {5, 4}, i32), 0, 1); },
      [&](Communicator& c, std::size_t r) { return c.broadcast(r, values(int(r), {3}, bf16), 1); },
  };
  for (std::size_t k = 0; k < calls.size(); ++k) {
    auto mpi = make_mpi_communicator("x", cpus(int(n)), std::vector<int>(n, 0), 20);
    auto local = make_local_communicator("x", cpus(int(n)), 20);
    EXPECT_EQ(mpi->backend(), "mpi");
    const auto got = on(*mpi, [&](std::size_t r) { return calls[k](*mpi, r); });
    const auto want = on(*local, [&](std::size_t r) { return calls[k](*local, r); });
    for (std::size_t r = 0; r < n; ++r) {
      EXPECT_EQ(got[r].shape(), want[r].shape()) << "call " << k;
      EXPECT_EQ(got[r].codes(), want[r].codes()) << "call " << k << ", member " << r;
    }
    EXPECT_EQ(mpi->completed(0), 1u);
  }
}

TEST(DistMpi, SendAndRecvCheckWhatArrives) {
  auto comm = make_mpi_communicator("pp", cpus(2), {0, 0}, 20);
  const NumericsPolicy f32 = default_policy(DType::fp32);
  comm->send(0, values(1, {2, 3}, f32), 1);
  comm->send(0, values(2, {2, 3}, f32), 1);
  EXPECT_EQ(comm->recv(1, 0, {2, 3}, f32).codes(), values(1, {2, 3}, f32).codes());
  const std::string e = error_of([&] { comm->recv(1, 0, {3, 2}, f32); }, ErrorCode::Collective);
  EXPECT_NE(e.find("recv #2 from cpu:0 to cpu:1 over mesh axis 'pp': the message differs from what recv expects in "
                   "the size of dim 0 (2 sent vs 3 expected)"),
            std::string::npos)
      << e;
}

TEST(DistMpi, AFailedMemberIsNamedByTheOthers) {
  auto comm = make_mpi_communicator("tp", cpus(3), {0, 0, 0}, 20);
  std::vector<std::string> errors(3);
  run_spmd(3, [&](std::size_t r) {
    try {
      if (r == 2) {
        comm->fail(2, "ValueError: on purpose");
        return;
      }
      comm->allreduce(r, values(0, {4}, default_policy(DType::fp32)), ReduceOp::sum);
    } catch (const Error& e) {
      errors[r] = e.what();
    }
  }, {});
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("allreduce #1 over mesh axis 'tp': member cpu:2 (rank 2) failed: ValueError: on purpose"),
              std::string::npos)
        << errors[r];
  }
}

// failure() is what queued GPU work polls (the nccl backend's watches): it
// names a failed member at once, without a collective, and never blocks.
TEST(DistMpi, FailureNamesAFailedMemberWithoutWaiting) {
  auto comm = make_mpi_communicator("tp", cpus(3), {0, 0, 0}, 20);
  EXPECT_EQ(comm->failure(0), "");
  comm->fail(2, "OutOfMemoryError: on purpose");
  EXPECT_EQ(comm->failure(0), "member cpu:2 (rank 2) failed: OutOfMemoryError: on purpose");
  EXPECT_EQ(comm->failure(1), comm->failure(0));
  EXPECT_EQ(comm->failure(2), "") << "a member is not told of its own failure";
}

TEST(DistMpi, AMismatchNamesBothCalls) {
  auto comm = make_mpi_communicator("tp", cpus(2), {0, 0}, 20);
  std::vector<std::string> errors(2);
  run_spmd(2, [&](std::size_t r) {
    try {
      const Tensor x = values(0, {4, 2}, default_policy(DType::fp32));
      if (r == 0) comm->allreduce(0, x, ReduceOp::sum);
      else comm->reduce_scatter(1, x, 0, ReduceOp::sum);
    } catch (const Error& e) {
      errors[r] = e.what();
    }
  }, {});
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("members disagree on the operation (allreduce vs reduce_scatter): cpu:0 called allreduce of "
                     "[4, 2] fp32 (sum), cpu:1 called reduce_scatter of [4, 2] fp32 (sum, dim 0)"),
              std::string::npos)
        << e;
  }
}

TEST(DistMpi, ATimeoutCarriesTheFlightRecord) {
  auto comm = make_mpi_communicator("dp", cpus(2), {0, 0}, 0.3);
  const std::string e = error_of([&] { comm->broadcast(0, values(0, {2}, default_policy(DType::fp32)), 0); },
                                 ErrorCode::Collective);
  EXPECT_NE(e.find("broadcast #1 over mesh axis 'dp': timed out after 0.3 s (TESSERA_COLLECTIVE_TIMEOUT) waiting for "
                   "cpu:1 (rank 1) to arrive"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("flight recorder of MPI process 0"), std::string::npos) << e;
  EXPECT_NE(e.find("broadcast #1 over mesh axis 'dp' by cpu:0, broadcast of [2] fp32 (root 0): timed out"),
            std::string::npos)
      << e;
  // The group stays broken.
  const std::string again = error_of([&] { comm->broadcast(1, values(0, {2}, default_policy(DType::fp32)), 0); },
                                     ErrorCode::Collective);
  EXPECT_NE(again.find("timed out"), std::string::npos) << again;
}

TEST(DistMpi, TensorsTravelAsTheirCodes) {
  const Tensor fp4 = Tensor::from_values(std::vector<double>{0.5, -1, 1.5, 6, -0.0}, {5},
                                         default_policy(DType::fp4_e2m1));
  const Tensor back = tensor_from_bytes(tensor_to_bytes(fp4), {5}, fp4.policy());
  EXPECT_EQ(back.codes(), fp4.codes());
  const std::string e =
      error_of([&] { tensor_from_bytes("abc", {5}, fp4.policy()); }, ErrorCode::ArgumentInvalid);
  EXPECT_NE(e.find("3 bytes for a tensor of 5 element(s)"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessera::dist

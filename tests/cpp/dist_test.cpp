// The distributed layer on in-process devices: meshes and their errors,
// layouts (uneven and cyclic splits), distributed tensors (scatter, gather,
// partial sums, parts), and the local communicator's collectives against
// values computed here, with its failure modes (a failed member, a member
// that never comes, mismatched calls).
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "tessera/dist/communicator.h"
#include "tessera/dist/dist_tensor.h"
#include "tessera/dist/spmd.h"
#include "tessera/support/error.h"
#include "dist_test_util.h"

namespace tessera::dist {
namespace {

using test_util::cpus;
using test_util::error_of;

const NumericsPolicy kF32 = default_policy(DType::fp32);

Tensor iota(std::vector<std::int64_t> shape, const NumericsPolicy& p = kF32) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return Tensor::from_values(v, std::move(shape), p);
}

TEST(DistMesh, CoordinatesAndGroups) {
  Mesh m(cpus(8), {"dp", "tp"}, {2, 4});
  EXPECT_EQ(m.axis_size("tp"), 4);
  EXPECT_EQ(m.coords(6), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(m.rank_of({1, 2}), 6u);
  EXPECT_EQ(m.axis_group("tp", 5), (std::vector<std::size_t>{4, 5, 6, 7}));
  EXPECT_EQ(m.axis_group("dp", 5), (std::vector<std::size_t>{1, 5}));
  EXPECT_EQ(m.describe(), "mesh(dp=2, tp=4) over cpu:0..cpu:7");
}

TEST(DistMesh, BadMeshesAreClearErrors) {
  EXPECT_NE(error_of([] { Mesh(cpus(6), {"dp", "tp"}, {2, 4}); }, ErrorCode::ArgumentInvalid)
                .find("shape 2 x 4 holds 8 device(s) but 6 were given"),
            std::string::npos);
  EXPECT_NE(error_of([] { Mesh({"cpu:0", "cpu:0"}, {"tp"}, {2}); }, ErrorCode::ArgumentInvalid)
                .find("device 'cpu:0' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { Mesh(cpus(4), {"tp", "tp"}, {2, 2}); }, ErrorCode::ArgumentInvalid)
                .find("axis name 'tp' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { Mesh({"tpu:0"}, {"tp"}, {1}); }, ErrorCode::Device).find("unknown device 'tpu:0'"),
            std::string::npos);
  Mesh m(cpus(2), {"tp"}, {2});
  EXPECT_NE(error_of([&] { (void)m.axis_size("dp"); }, ErrorCode::ArgumentInvalid)
                .find("mesh axis 'dp' is not an axis of mesh(tp=2)"),
            std::string::npos);
}

TEST(DistMesh, VirtualCudaDevices) {
  setenv("TESSERA_VIRTUAL_DEVICES", "cuda:72", 1);
  Mesh m([] {
    std::vector<std::string> d;
    for (int i = 0; i < 72; ++i) d.push_back("cuda:" + std::to_string(i));
    return d;
  }(), {"dp", "tp", "pp"}, {4, 9, 2});
  EXPECT_EQ(memory_device("cuda:71"), "cpu");
  EXPECT_NE(error_of([] { (void)memory_device("cuda:72"); }, ErrorCode::Device).find("not among the 72 virtual"),
            std::string::npos);
  setenv("TESSERA_VIRTUAL_DEVICES", "gpu:2", 1);
  EXPECT_NE(error_of([] { (void)virtual_cuda_devices(); }, ErrorCode::ArgumentInvalid).find("expected cuda:N"),
            std::string::npos);
  unsetenv("TESSERA_VIRTUAL_DEVICES");
}

TEST(DistLayout, UnevenBlocksFollowArraySplitAndCyclicDealsBlocks) {
  // 10 over 4 parts: 3, 3, 2, 2 (numpy.array_split).
  EXPECT_EQ(block_part(10, 4, 0).length, 3);
  EXPECT_EQ(block_part(10, 4, 1).start, 3);
  EXPECT_EQ(block_part(10, 4, 2).start, 6);
  EXPECT_EQ(block_part(10, 4, 3).length, 2);
  Mesh m(cpus(3), {"tp"}, {3});
  ShardSpec cyc{{"0"}, {"tp"}, {}, 2};
  Layout l = Layout::resolve(cyc, 1, m);
  // Blocks of 2 over 3 parts: part 1 holds [2, 3] and [8, 9] of 11 elements.
  auto runs = l.runs(0, 11, m, 1);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].start, 2);
  EXPECT_EQ(runs[1].start, 8);
  EXPECT_EQ(l.shard_shape({11}, m, 2), (std::vector<std::int64_t>{3}));  // [4, 5] and [10]
}

TEST(DistLayout, SpecErrorsNameWhatIsWrong) {
  Mesh m(cpus(4), {"dp", "tp"}, {2, 2});
  EXPECT_NE(error_of([&] { Layout::resolve({{"row", "col"}, {"tp", "tp"}, {}, 0}, 2, m); }, ErrorCode::ArgumentInvalid)
                .find("mesh axis 'tp' is used twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Layout::resolve({{"3"}, {"tp"}, {}, 0}, 2, m); }, ErrorCode::ArgumentInvalid)
                .find("out of range for a tensor of 2 dim(s)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Layout::resolve({{"row"}, {"pp"}, {}, 0}, 2, m); }, ErrorCode::ArgumentInvalid)
                .find("mesh axis 'pp'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Layout::resolve({{"row"}, {}, {}, 0}, 2, m); }, ErrorCode::ArgumentInvalid)
                .find("pair up one to one"),
            std::string::npos);
}

TEST(DistTensor, ScatterGatherRoundTripsEveryLayout) {
  auto m = std::make_shared<const Mesh>(cpus(8), std::vector<std::string>{"dp", "tp"}, std::vector<std::int64_t>{2, 4});
  const Tensor x = iota({7, 10}, parse_policy("bf16 @accum(fp32)"));
  for (const ShardSpec& spec : std::vector<ShardSpec>{{{"col"}, {"tp"}, {}, 0},
                                                       {{"row", "col"}, {"dp", "tp"}, {}, 0},
                                                       {{"col", "col"}, {"dp", "tp"}, {}, 0},
                                                       {{"row"}, {"tp"}, {}, 3},
                                                       {{}, {}, {}, 0}}) {
    const Layout l = Layout::resolve(spec, 2, *m);
    SCOPED_TRACE(l.describe());
    const DistTensor d = DistTensor::scatter(x, l, m);
    EXPECT_EQ(d.gather().codes(), x.codes());
    // Each shard holds its layout's elements.
    const Tensor s5 = d.shard(5);
    EXPECT_EQ(s5.shape(), l.shard_shape({7, 10}, *m, 5));
  }
  // Column split over tp, 10 columns on 4 devices: 3, 3, 2, 2.
  const DistTensor d = DistTensor::scatter(x, Layout::resolve({{"col"}, {"tp"}, {}, 0}, 2, *m), m);
  EXPECT_EQ(d.shard(2).shape(), (std::vector<std::int64_t>{7, 2}));
  EXPECT_EQ(d.shard(2).to_values()[0], 6.0);
  auto parts = d.parts("tp");
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[1].to_values()[0], 3.0);
  // parts over dp of a tensor split over tp spans several devices per part.
  const DistTensor rows = DistTensor::scatter(x, Layout::resolve({{"row"}, {"tp"}, {}, 0}, 2, *m), m);
  EXPECT_NE(error_of([&] { (void)rows.parts("dp"); }, ErrorCode::ArgumentInvalid).find("also split over mesh axis 'tp'"),
            std::string::npos);
}

TEST(DistTensor, PartialTensorsGatherToTheirRankOrderSum) {
  auto m = std::make_shared<const Mesh>(cpus(4), std::vector<std::string>{"tp"}, std::vector<std::int64_t>{4});
  const Layout l = Layout::resolve({{}, {}, {"tp"}, 0}, 1, *m);
  std::vector<Tensor> shards;
  const std::vector<double> terms = {1e8, 1.0, -1e8, 1.0};  // fp32 in rank order: ((1e8 + 1) - 1e8) + 1 = 1
  for (double t : terms) shards.push_back(Tensor::from_values(std::vector<double>{t, 2 * t}, {2}, kF32));
  const DistTensor d = DistTensor::from_shards({2}, l, m, kF32, shards);
  const auto v = d.gather().to_values();
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], 2.0);
  // scatter of a partial layout: the value on coordinate 0, zeros elsewhere.
  const DistTensor s = DistTensor::scatter(iota({3}), l, m);
  EXPECT_EQ(s.shard(0).to_values(), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(s.shard(3).to_values(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(s.gather().to_values(), (std::vector<double>{0, 1, 2}));
}

TEST(DistTensor, PackedShardsRoundTrip) {
  auto m = std::make_shared<const Mesh>(cpus(3), std::vector<std::string>{"tp"}, std::vector<std::int64_t>{3});
  const Tensor x = Tensor::from_values(std::vector<double>{0.5, -1, 1.5, 2, -3, 4, 6, 0}, {8}, default_policy(DType::fp4_e2m1));
  const DistTensor d = DistTensor::scatter(x, Layout::resolve({{"row"}, {"tp"}, {}, 0}, 1, *m), m);
  EXPECT_EQ(d.shard(1).to_values(), (std::vector<double>{2, -3, 4}));
  EXPECT_EQ(d.gather().codes(), x.codes());
}

// Runs body(rank, comm) on n threads sharing one local communicator.
void spmd(int n, const std::function<void(std::size_t, Communicator&)>& body, double timeout = 30) {
  auto comm = make_local_communicator("tp", cpus(n), timeout);
  run_spmd(
      static_cast<std::size_t>(n), [&](std::size_t r) { body(r, *comm); },
      [&](std::size_t r, const std::string& why) { comm->fail(r, why); });
}

TEST(DistCollectives, EveryCollectiveAgainstItsDefinition) {
  const int n = 3;
  std::vector<Tensor> in;
  for (int r = 0; r < n; ++r) {
    std::vector<double> v;
    for (int i = 0; i < 8; ++i) v.push_back(r * 100 + i);
    in.push_back(Tensor::from_values(v, {4, 2}, kF32));
  }
  std::vector<std::vector<double>> sum(n), gathered(n), scattered(n), a2a(n), bcast(n), maxes(n);
  spmd(n, [&](std::size_t r, Communicator& c) {
    sum[r] = c.allreduce(r, in[r], ReduceOp::sum).to_values();
    maxes[r] = c.allreduce(r, in[r], ReduceOp::max).to_values();
    gathered[r] = c.all_gather(r, in[r], 0).to_values();
    scattered[r] = c.reduce_scatter(r, in[r], 0, ReduceOp::sum).to_values();
    a2a[r] = c.all_to_all(r, in[r], 0, 0).to_values();
    bcast[r] = c.broadcast(r, in[r], 2).to_values();
  });
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(sum[r][i], 300.0 + 3 * i);
      EXPECT_EQ(maxes[r][i], 200.0 + i);
      EXPECT_EQ(bcast[r][i], 200.0 + i);
    }
    ASSERT_EQ(gathered[r].size(), 24u);
    EXPECT_EQ(gathered[r][8], 100.0);  // member 1's rows after member 0's
  }
  // reduce_scatter of 4 rows over 3 members: 2, 1, 1 rows (array_split).
  EXPECT_EQ(scattered[0], (std::vector<double>{300, 303, 306, 309}));
  EXPECT_EQ(scattered[2], (std::vector<double>{318, 321}));
  // all_to_all: member 1 gets row 2 (its part: rows [2, 3) of 4 over 3) of every member.
  EXPECT_EQ(a2a[1], (std::vector<double>{4, 5, 104, 105, 204, 205}));
}

// fp32 values whose sum depends on the order: 1e8 swallows a 1 (fp32 spacing
// at 1e8 is 8), so each algorithm's order shows in the result.
TEST(DistCollectives, RingAndTreeCombineInTheirOwnOrders) {
  const int n = 4;
  // Member r holds column r of this table; 4 elements, so block_part gives each member one part.
  const float x[4][4] = {{1.f, 1.f, 1e8f, -1e8f}, {1.f, 1e8f, 1.f, -1e8f}, {-1e8f, 1.f, 1e8f, 1.f}, {3.f, -1e8f, 1.f, 1e8f}};
  std::vector<Tensor> in;
  for (int r = 0; r < n; ++r) {
    std::vector<double> v;
    for (int i = 0; i < 4; ++i) v.push_back(x[i][r]);
    in.push_back(Tensor::from_values(v, {4}, kF32));
  }
  auto run = [&](Algorithm a) {
    std::vector<std::vector<double>> got(n);
    spmd(n, [&](std::size_t r, Communicator& c) { got[r] = c.allreduce(r, in[r], ReduceOp::sum, a).to_values(); });
    for (int r = 1; r < n; ++r) EXPECT_EQ(got[r], got[0]);
    return got[0];
  };
  std::vector<double> rank_order(4), ring(4), tree(4);
  for (int i = 0; i < 4; ++i) {
    const float* v = x[i];
    rank_order[i] = ((v[0] + v[1]) + v[2]) + v[3];
    // Element i is part i: the ring starts at member i + 1.
    float acc = v[(i + 1) % 4];
    for (int k = 2; k <= 4; ++k) acc = acc + v[(i + k) % 4];
    ring[i] = acc;
    tree[i] = (v[0] + v[1]) + (v[2] + v[3]);
  }
  EXPECT_EQ(run(Algorithm::rank_order), rank_order);
  EXPECT_EQ(run(Algorithm::ring), ring);
  EXPECT_EQ(run(Algorithm::tree), tree);
  EXPECT_EQ(run(Algorithm::native), rank_order);  // the local backend's own algorithm
  EXPECT_NE(rank_order, ring);
  EXPECT_NE(rank_order, tree);
  EXPECT_NE(ring, tree);
}

TEST(DistCollectives, MembersDisagreeingOnTheAlgorithmIsAMismatch) {
  std::vector<std::string> errors(2);
  spmd(2, [&](std::size_t r, Communicator& c) {
    try {
      (void)c.allreduce(r, Tensor::zeros({4}, kF32), ReduceOp::sum, r == 0 ? Algorithm::rank_order : Algorithm::tree);
    } catch (const Error& e) {
      errors[r] = e.what();
    }
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("disagree on the arguments"), std::string::npos) << e;
  EXPECT_EQ(error_of([] { (void)parse_algorithm("sharp_ring"); }, ErrorCode::ArgumentInvalid).find("sharp_ring") !=
                std::string::npos,
            true);
}

TEST(DistCollectives, SumsAreInRankOrderAtTheAccumulationType) {
  // bf16 @accum(fp32): ((x0 + x1) + x2) in fp32, rounded once to bf16.
  const NumericsPolicy p = parse_policy("bf16 @accum(fp32)");
  const std::vector<double> xs = {256.0, 1.0, 1.0};  // bf16 has 8 bits: 256 + 1 + 1 = 258 exactly in fp32
  std::vector<double> got(3);
  spmd(3, [&](std::size_t r, Communicator& c) {
    got[r] = c.allreduce(r, Tensor::from_values(std::vector<double>{xs[r]}, {1}, p), ReduceOp::sum).to_values()[0];
  });
  for (double g : got) EXPECT_EQ(g, 258.0);
  const Tensor want = reduce_in_rank_order({Tensor::from_values(std::vector<double>{256.0}, {1}, p),
                                            Tensor::from_values(std::vector<double>{1.0}, {1}, p),
                                            Tensor::from_values(std::vector<double>{1.0}, {1}, p)},
                                           ReduceOp::sum);
  EXPECT_EQ(want.to_values()[0], 258.0);
}

TEST(DistCollectives, AFailedMemberReleasesTheOthersWithItsName) {
  const std::string msg = error_of(
      [] {
        spmd(3, [](std::size_t r, Communicator& c) {
          if (r == 1) raise(ErrorCode::ArgumentInvalid, "the user's bug");
          (void)c.allreduce(r, Tensor::zeros({4}, kF32), ReduceOp::sum);
        });
      },
      ErrorCode::ArgumentInvalid);  // the cause is rethrown, not the peers' CollectiveError
  EXPECT_NE(msg.find("the user's bug"), std::string::npos) << msg;
}

TEST(DistCollectives, AMemberThatNeverComesIsATimeoutNamingIt) {
  auto comm = make_local_communicator("tp", cpus(2), 0.3);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg =
      error_of([&] { (void)comm->allreduce(0, Tensor::zeros({2}, kF32), ReduceOp::sum); }, ErrorCode::Collective);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_NE(msg.find("allreduce #1 over mesh axis 'tp'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu:1 (completed 0)"), std::string::npos) << msg;
  // The communicator stays broken.
  EXPECT_NE(error_of([&] { (void)comm->allreduce(1, Tensor::zeros({2}, kF32), ReduceOp::sum); }, ErrorCode::Collective)
                .find("timed out"),
            std::string::npos);
}

TEST(DistCollectives, MismatchedCallsNameTheFirstDifference) {
  std::vector<std::string> msgs(2);
  auto comm = make_local_communicator("tp", cpus(2), 30);
  run_spmd(
      2,
      [&](std::size_t r) {
        try {
          if (r == 0) (void)comm->allreduce(r, Tensor::zeros({4}, kF32), ReduceOp::sum);
          if (r == 1) (void)comm->allreduce(r, Tensor::zeros({5}, kF32), ReduceOp::sum);
        } catch (const Error& e) {
          msgs[r] = e.what();
        }
      },
      [&](std::size_t r, const std::string& why) { comm->fail(r, why); });
  for (const std::string& m : msgs) {
    EXPECT_NE(m.find("members disagree on the size of dim 0 (4 vs 5)"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace tessera::dist

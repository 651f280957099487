// Point-to-point messages of the local communicator (communicator.h: send,
// recv): buffered FIFO mailboxes per pair of members, exact copies of every
// encoding, and the failure modes a pipeline meets (a failed source, a
// source that never sends, a message of another shape or dtype).
#include <gtest/gtest.h>

#include <chrono>

#include "tessera/dist/communicator.h"
#include "tessera/dist/spmd.h"
#include "tessera/support/error.h"
#include "dist_test_util.h"

namespace tessera::dist {
namespace {

using test_util::cpus;
using test_util::error_of;

const NumericsPolicy kF32 = default_policy(DType::fp32);

Tensor filled(double v, std::vector<std::int64_t> shape = {2, 3}, const NumericsPolicy& p = kF32) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = v + static_cast<double>(i);
  return Tensor::from_values(values, std::move(shape), p);
}

// Runs body(rank) on n threads; a rank that raises is failed in `comm`, as the launcher does.
void spmd(Communicator& comm, const std::function<void(std::size_t)>& body) {
  run_spmd(comm.size(), body, [&](std::size_t r, const std::string& why) { comm.fail(r, why); });
}

TEST(DistP2P, SendsAreBufferedAndArriveInOrder) {
  // Both members send everything before receiving anything: with sends that
  // waited for their recv this would deadlock.
  auto comm = make_local_communicator("pp", cpus(2), 10);
  std::vector<std::vector<double>> got(2);
  spmd(*comm, [&](std::size_t r) {
    const std::size_t peer = 1 - r;
    for (int k = 0; k < 3; ++k) comm->send(r, filled(100.0 * static_cast<double>(r) + 10 * k), peer);
    for (int k = 0; k < 3; ++k) {
      const Tensor t = comm->recv(r, peer, {2, 3}, kF32);
      got[r].push_back(t.to_values()[0]);
      EXPECT_EQ(t.to_values(), filled(100.0 * static_cast<double>(peer) + 10 * k).to_values());
    }
  });
  EXPECT_EQ(got[0], (std::vector<double>{100, 110, 120}));
  EXPECT_EQ(got[1], (std::vector<double>{0, 10, 20}));
}

TEST(DistP2P, EachPairHasItsOwnMailbox) {
  // Member 2 receives from 1 before 0, whatever order they sent in; a
  // member may also send to itself.
  auto comm = make_local_communicator("pp", cpus(3), 10);
  std::vector<double> order;
  spmd(*comm, [&](std::size_t r) {
    if (r < 2) comm->send(r, filled(static_cast<double>(r)), 2);
    if (r == 2) {
      comm->send(2, filled(7), 2);
      order.push_back(comm->recv(2, 1, {2, 3}, kF32).to_values()[0]);
      order.push_back(comm->recv(2, 0, {2, 3}, kF32).to_values()[0]);
      order.push_back(comm->recv(2, 2, {2, 3}, kF32).to_values()[0]);
    }
  });
  EXPECT_EQ(order, (std::vector<double>{1, 0, 7}));
}

TEST(DistP2P, AMessageIsACopyOfEveryEncodingAtTheSend) {
  auto comm = make_local_communicator("pp", cpus(2), 10);
  // fp4 packs two codes a byte; bf16 @accum(fp32) keeps its policy.
  const Tensor fp4 =
      Tensor::from_values(std::vector<double>{0.5, -1, 1.5, 6, -0.0}, {5}, default_policy(DType::fp4_e2m1));
  const NumericsPolicy bf16 = parse_policy("bf16 @accum(fp32)");
  Tensor x = filled(1, {4}, bf16);
  const std::vector<std::uint64_t> sent_codes = x.codes();
  comm->send(0, fp4, 1);
  comm->send(0, x, 1);
  // The sender keeps writing its buffer after the send (a NaN payload in bf16).
  *static_cast<std::uint16_t*>(x.data()) = 0x7fc1;
  EXPECT_EQ(comm->recv(1, 0, {5}, default_policy(DType::fp4_e2m1)).codes(), fp4.codes());
  const Tensor y = comm->recv(1, 0, {4}, bf16);
  EXPECT_EQ(y.codes(), sent_codes);
  EXPECT_EQ(y.policy(), bf16);
}

TEST(DistP2P, ARecvFromAFailedMemberRaisesNamingItAndTheCall) {
  auto comm = make_local_communicator("pp", cpus(2), 30);
  std::string msg;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string cause = error_of(
      [&] {
        spmd(*comm, [&](std::size_t r) {
          if (r == 0) raise(ErrorCode::ArgumentInvalid, "stage 0 broke");
          try {
            (void)comm->recv(1, 0, {2, 3}, kF32);
          } catch (const Error& e) {
            msg = e.what();
            throw;
          }
        });
      },
      ErrorCode::ArgumentInvalid);  // the cause is rethrown, not the receiver's CollectiveError
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_NE(cause.find("stage 0 broke"), std::string::npos) << cause;
  EXPECT_NE(msg.find("recv #1 from cpu:0 to cpu:1 over mesh axis 'pp'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("member cpu:0 (rank 0) failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stage 0 broke"), std::string::npos) << msg;
  // Later sends raise too.
  EXPECT_NE(error_of([&] { comm->send(1, filled(0), 0); }, ErrorCode::Collective).find("cpu:0 (rank 0) failed"),
            std::string::npos);
}

TEST(DistP2P, ASourceThatNeverSendsIsATimeoutNamingIt) {
  auto comm = make_local_communicator("pp", cpus(2), 0.3);
  comm->send(0, filled(0), 1);
  EXPECT_EQ(comm->recv(1, 0, {2, 3}, kF32).to_values()[0], 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = error_of([&] { (void)comm->recv(1, 0, {2, 3}, kF32); }, ErrorCode::Collective);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 5.0);
  EXPECT_NE(msg.find("recv #2 from cpu:0 to cpu:1 over mesh axis 'pp'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TESSERA_COLLECTIVE_TIMEOUT"), std::string::npos) << msg;
  EXPECT_NE(msg.find("waiting for cpu:0 (rank 0), which has sent 1 message(s) to cpu:1"), std::string::npos) << msg;
  // The mailboxes stay broken: a message sent now is not delivered.
  EXPECT_NE(error_of([&] { comm->send(0, filled(0), 1); }, ErrorCode::Collective).find("timed out"), std::string::npos);
}

TEST(DistP2P, AMessageOfAnotherShapeOrDtypeNamesTheDifference) {
  struct Case {
    std::vector<std::int64_t> shape;
    NumericsPolicy policy;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{2, 4},
       kF32,
       "the size of dim 1 (3 sent vs 4 expected): cpu:0 sent [2, 3] fp32 @accum(fp32), cpu:1 "
       "expects [2, 4] fp32 @accum(fp32)"},
      {{6}, kF32, "the rank (2 sent vs 1 expected)"},
      {{2, 3}, default_policy(DType::bf16), "the dtype (fp32 sent vs bf16 expected)"},
      {{2, 3}, parse_policy("fp32 @accum(fp64)"), "the policy (fp32 @accum(fp32) sent vs fp32 @accum(fp64) expected)"},
  };
  for (const Case& c : cases) {
    auto comm = make_local_communicator("pp", cpus(2), 10);
    comm->send(0, filled(0), 1);
    const std::string msg = error_of([&] { (void)comm->recv(1, 0, c.shape, c.policy); }, ErrorCode::Collective);
    EXPECT_NE(msg.find("recv #1 from cpu:0 to cpu:1 over mesh axis 'pp': the message differs from what recv "
                       "expects in " +
                       c.want),
              std::string::npos)
        << msg;
  }
}

TEST(DistP2P, RanksOutsideTheAxisAreArgumentErrors) {
  auto comm = make_local_communicator("pp", cpus(2), 10);
  EXPECT_NE(error_of([&] { comm->send(0, filled(0), 2); }, ErrorCode::ArgumentInvalid)
                .find("send: the destination rank 2 is not a member of mesh axis 'pp' (2 members)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)comm->recv(0, 5, {1}, kF32); }, ErrorCode::ArgumentInvalid)
                .find("recv: the source rank 5 is not a member"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::dist

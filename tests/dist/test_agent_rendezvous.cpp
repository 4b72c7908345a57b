// The launch agents' rendezvous (dist/agent_rendezvous.h) in one process, agents as threads: a round's node
// ranks keep the survivors' order, a round is refused below MIN with the reason, and neither the ranks' key
// nor another job's key gets an agent in.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <string>
#include <vector>

#include "dist/agent_rendezvous.h"
#include "tests/dist/rank_processes.h"

namespace nanoforge {
namespace {

const RendezvousKey kJobKey =
    rendezvous_key_from_secret("this job's secret, 32 bytes long", "the test's secret");

AgentRendezvousOptions options_for(int port, int min_nodes, int max_nodes) {
  return {.host = "127.0.0.1",
          .port = port,
          .min_nodes = min_nodes,
          .max_nodes = max_nodes,
          .join_timeout_seconds = 3,
          .last_call_seconds = 0.5,
          .silence_seconds = 10,
          .hello_timeout_seconds = 2,
          .key = agents_rendezvous_key(kJobKey)};
}

// The survivors of a round come first in their old order, then the machines new to the job; every agent
// learns the same membership but its own node rank, and rank 0's address and port (the endpoint's + 1).
TEST(AgentRendezvous, SurvivorsKeepTheirOrderAndNewcomersComeLast) {
  const AgentRendezvousOptions options = options_for(test::free_port(), 3, 3);
  absl::StatusOr<std::unique_ptr<AgentRendezvousHost>> host = AgentRendezvousHost::start_if_here(options);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_NE(*host, nullptr);
  // A second agent of this machine finds the port taken: it does not host.
  absl::StatusOr<std::unique_ptr<AgentRendezvousHost>> second = AgentRendezvousHost::start_if_here(options);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, nullptr);

  std::vector<std::future<absl::StatusOr<AgentLink>>> joins;
  for (const int previous : {2, -1, 0})
    joins.push_back(
        std::async(std::launch::async, [&, previous] { return AgentLink::join(options, 1, previous); }));
  std::vector<int> node_ranks;
  for (auto& join : joins) {
    absl::StatusOr<AgentLink> link = join.get();
    ASSERT_TRUE(link.ok()) << link.status();
    EXPECT_EQ(link->membership().nnodes, 3);
    EXPECT_EQ(link->membership().master_port, options.port + 1);
    EXPECT_EQ(link->membership().previous_node_ranks, (std::vector<int>{0, 2, -1}));
    node_ranks.push_back(link->membership().node_rank);
  }
  EXPECT_EQ(node_ranks, (std::vector<int>{1, 2, 0}));  // old 2 -> 1, new -> 2, old 0 -> 0
}

TEST(AgentRendezvous, FewerThanMinWithinTheJoinTimeoutIsRefusedWithTheReason) {
  const AgentRendezvousOptions options = options_for(test::free_port(), 2, 3);
  absl::StatusOr<std::unique_ptr<AgentRendezvousHost>> host = AgentRendezvousHost::start_if_here(options);
  ASSERT_TRUE(host.ok() && *host != nullptr);
  absl::StatusOr<AgentLink> link = AgentLink::join(options, 1, -1);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(
      link.status().message().find("refused: only 1 of at least 2 agents joined within --join-timeout 3 s"),
      std::string::npos)
      << link.status();
}

// The ranks' key (the job's key itself) and another job's agents' key: the host refuses the hello, and the
// agent never gets a membership: it retries until its join timeout, then says that its key may be wrong.
// The host reports the first refusal from an address and then one line per 10 s, not one per retry.
TEST(AgentRendezvous, OnlyTheAgentsKeyOfThisJobGetsIn) {
  const AgentRendezvousOptions options = options_for(test::free_port(), 1, 1);
  absl::StatusOr<std::unique_ptr<AgentRendezvousHost>> host = AgentRendezvousHost::start_if_here(options);
  ASSERT_TRUE(host.ok() && *host != nullptr);
  AgentRendezvousOptions ranks_key = options;
  ranks_key.key = kJobKey;
  AgentRendezvousOptions other_job = options;
  other_job.key =
      agents_rendezvous_key(rendezvous_key_from_secret("another job's secret, 32 bytes!", "other"));
  testing::internal::CaptureStderr();
  for (const AgentRendezvousOptions& intruder : {ranks_key, other_job}) {
    absl::StatusOr<AgentLink> link = AgentLink::join(intruder, 1, -1);
    EXPECT_FALSE(link.ok()) << "an agent with the wrong key got a membership";
    EXPECT_NE(link.status().message().find("give every machine the same NANOFORGE_RENDEZVOUS_SECRET"),
              std::string::npos)
        << link.status();
  }
  const std::string refusals = testing::internal::GetCapturedStderr();
  EXPECT_NE(refusals.find("rendezvous host: refused 1 connection(s) from 127.0.0.1: "), std::string::npos)
      << refusals;
  EXPECT_NE(refusals.find("does not authenticate"), std::string::npos) << refusals;
  // Two agents retrying every 200 ms for 3 s each: some 30 refusals, reported once (6 s < 10 s).
  size_t lines = 0;
  for (size_t at = refusals.find("refused "); at != std::string::npos; at = refusals.find("refused ", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << refusals;
  absl::StatusOr<AgentLink> genuine = AgentLink::join(options, 1, -1);
  ASSERT_TRUE(genuine.ok()) << genuine.status();
  EXPECT_EQ(genuine->membership().nnodes, 1);
}

}  // namespace
}  // namespace nanoforge

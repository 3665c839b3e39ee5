// -H and hostfiles in horovodrun's notation, and the refusals naming the
// entry (and the file's line) that is wrong.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/herdrun/hosts.h"

namespace herd::launcher {
namespace {

std::vector<std::pair<std::string, int>> pairs(const std::vector<Host>& hosts) {
  std::vector<std::pair<std::string, int>> result;
  for (const auto& host : hosts) result.emplace_back(host.name, host.slots);
  return result;
}

TEST_CASE("-H host:slots lists") {
  CHECK(pairs(parse_hosts("host1:2,host2:4")) ==
        std::vector<std::pair<std::string, int>>{{"host1", 2}, {"host2", 4}});
  CHECK(pairs(parse_hosts("localhost")) ==
        std::vector<std::pair<std::string, int>>{{"localhost", 1}});
  CHECK(mpirun_host_list(parse_hosts("a, b:3")) == "a:1,b:3");
  CHECK(total_slots(parse_hosts("a:2,b:3,c")) == 6);
  CHECK_THROWS_WITH(parse_hosts("a:2,,b"), Catch::Contains("an empty entry"));
  CHECK_THROWS_WITH(parse_hosts("a:0"), Catch::Contains("\"a:0\""));
  CHECK_THROWS_WITH(parse_hosts("a:x"), Catch::Contains("not a positive integer"));
  CHECK_THROWS_WITH(parse_hosts(":2"), Catch::Contains("names no host"));
}

TEST_CASE("hostfiles: host slots=N, host:N, comments and blank lines") {
  const std::string text =
      "# the cluster\n"
      "node1 slots=4\n"
      "\n"
      "node2:2   # a comment\n"
      "node3\n";
  CHECK(pairs(parse_hostfile(text, "hosts.txt")) ==
        std::vector<std::pair<std::string, int>>{{"node1", 4}, {"node2", 2}, {"node3", 1}});
  CHECK_THROWS_WITH(parse_hostfile("node1 slots=4\nnode2 cpus=2\n", "hosts.txt"),
                    Catch::Contains("hosts.txt:2") && Catch::Contains("node2 cpus=2"));
  CHECK_THROWS_WITH(parse_hostfile("node1 slots=-1\n", "h"), Catch::Contains("h:1"));
  CHECK_THROWS_WITH(parse_hostfile("# nothing\n\n", "empty.txt"),
                    Catch::Contains("empty.txt: names no host"));
}

}  // namespace
}  // namespace herd::launcher

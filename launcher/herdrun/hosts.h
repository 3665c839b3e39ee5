// The machines a job runs on and how many ranks each takes, from -H
// ("host1:2,host2:2") or a hostfile (one "host slots=N" or "host:N" a line,
// '#' comments), in horovodrun's notation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace herd::launcher {

struct Host {
  std::string name;
  int slots = 1;  // ranks this host takes; 1 when the entry gives none
};

// Parses -H's value. Throws std::invalid_argument naming the bad entry.
std::vector<Host> parse_hosts(std::string_view text);

// Parses a hostfile's contents; `source` (the file's name) goes into the
// messages. Throws std::invalid_argument naming the file, line and entry.
std::vector<Host> parse_hostfile(std::string_view text, const std::string& source);

// Open MPI's -H value for `hosts`: "host1:2,host2:2".
std::string mpirun_host_list(const std::vector<Host>& hosts);

// The slots of every host together.
int total_slots(const std::vector<Host>& hosts);

}  // namespace herd::launcher

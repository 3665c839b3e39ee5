// docs/configuration.md against the settings table (src/config_settings.cc): every
// HERD_* variable the page names is a setting, every setting has a row in the
// page's table with the table's default, in the table's order, and the page's
// list of the settings herd::init compares across ranks is the table's; its
// table of Horovod's variables has a row for each HOROVOD_* alias, saying
// which setting it stands for, and for each variable that draws a warning.
// The check runs on the page in the source tree (HERD_CONFIGURATION_DOC, set by
// tests/CMakeLists.txt) and on tampered copies of it, which it must reject.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "src/config.h"

namespace herd::detail {
namespace {

// The sentence of the page that lists the compared settings, in parentheses.
constexpr char kComparedListOpening[] = "compares all but the process sets across ranks (";

bool is_name_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

// Every HERD_<NAME> in `text`, in order, repeats included.
std::vector<std::string> herd_variables(const std::string& text) {
  std::vector<std::string> names;
  for (std::size_t at = text.find("HERD_"); at != std::string::npos;
       at = text.find("HERD_", at + 1)) {
    if (at > 0 && is_name_char(text[at - 1])) continue;
    std::size_t end = at + 5;
    while (end < text.size() && is_name_char(text[end])) ++end;
    if (end > at + 5) names.push_back(text.substr(at, end - at));
  }
  return names;
}

std::string trim(const std::string& text) {
  const std::size_t first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

struct DocRow {
  std::string variable;
  std::string default_value;
};

// The rows of the page's "## Settings" table: its variable and default
// columns. A default reads `value` (with a note after it) or "empty".
std::vector<DocRow> settings_rows(const std::string& doc) {
  std::vector<DocRow> rows;
  std::istringstream lines(doc);
  std::string line;
  bool in_section = false;
  while (std::getline(lines, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Settings";
    if (!in_section || line.rfind("| `HERD_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::size_t start = 1;
    for (std::size_t bar = line.find('|', start); bar != std::string::npos;
         bar = line.find('|', start)) {
      cells.push_back(trim(line.substr(start, bar - start)));
      start = bar + 1;
    }
    if (cells.size() < 2) continue;
    DocRow row;
    row.variable = cells[0].substr(1, cells[0].find('`', 1) - 1);
    const std::string& cell = cells[1];
    if (cell == "empty") {
      row.default_value = "";
    } else if (!cell.empty() && cell[0] == '`') {
      row.default_value = cell.substr(1, cell.find('`', 1) - 1);
    } else {
      row.default_value = "(unreadable: " + cell + ")";
    }
    rows.push_back(row);
  }
  return rows;
}

// Every way `doc` and `table` disagree, one sentence each; empty when they
// agree.
std::vector<std::string> doc_mismatches(const std::string& doc,
                                        const std::vector<SettingDoc>& table) {
  std::vector<std::string> problems;
  std::set<std::string> settings;
  for (const SettingDoc& setting : table) settings.insert(setting.variable);

  std::set<std::string> named;
  for (const std::string& variable : herd_variables(doc)) {
    if (named.insert(variable).second && settings.count(variable) == 0) {
      problems.push_back(variable + " is on the page but not in the settings table");
    }
  }
  for (const SettingDoc& setting : table) {
    if (named.count(setting.variable) == 0) {
      problems.push_back(setting.variable + " is in the settings table but not on the page");
    }
  }

  const std::vector<DocRow> rows = settings_rows(doc);
  std::vector<std::string> row_order;
  for (const DocRow& row : rows) {
    auto setting = std::find_if(table.begin(), table.end(),
                                [&](const SettingDoc& s) { return s.variable == row.variable; });
    if (setting == table.end()) continue;  // reported above
    row_order.push_back(row.variable);
    if (row.default_value != setting->default_value) {
      problems.push_back(row.variable + ": the page's default is '" + row.default_value +
                         "', the table's '" + setting->default_value + "'");
    }
  }
  std::vector<std::string> table_order;
  for (const SettingDoc& setting : table) {
    if (std::count(row_order.begin(), row_order.end(), setting.variable) == 0) {
      problems.push_back(setting.variable + " has no row in the page's Settings table");
    } else {
      table_order.push_back(setting.variable);
    }
  }
  std::vector<std::string> unique_rows;
  for (const std::string& variable : row_order) {
    if (std::count(unique_rows.begin(), unique_rows.end(), variable) != 0) {
      problems.push_back(variable + " has more than one row in the page's Settings table");
    } else {
      unique_rows.push_back(variable);
    }
  }
  if (unique_rows.size() == table_order.size() && unique_rows != table_order) {
    problems.push_back(
        "the page's Settings table lists the settings in another order than "
        "the settings table");
  }

  const std::size_t opening = doc.find(kComparedListOpening);
  if (opening == std::string::npos) {
    problems.push_back(std::string("the page no longer says \"") + kComparedListOpening +
                       "...)\", the list of the settings compared across ranks");
    return problems;
  }
  const std::size_t first = opening + sizeof(kComparedListOpening) - 1;
  const std::vector<std::string> listed =
      herd_variables(doc.substr(first, doc.find(')', first) - first));
  const std::set<std::string> listed_set(listed.begin(), listed.end());
  for (const SettingDoc& setting : table) {
    const bool on_list = listed_set.count(setting.variable) != 0;
    if (setting.compared_across_ranks && !on_list) {
      problems.push_back(setting.variable +
                         " is compared across ranks but missing from the page's list");
    } else if (!setting.compared_across_ranks && on_list) {
      problems.push_back(setting.variable +
                         " is on the page's list of compared settings but is not compared");
    }
  }
  return problems;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// `doc` without the first `variable` (in backticks) of its list of compared
// settings.
std::string off_compared_list(const std::string& doc, const std::string& variable) {
  const std::size_t opening = doc.find(kComparedListOpening);
  REQUIRE(opening != std::string::npos);
  const std::size_t at = doc.find("`" + variable + "`", opening);
  REQUIRE(at < doc.find(')', opening));
  return std::string(doc).erase(at, variable.size() + 2);
}

// The line of the page's table that starts with `start`, newline included.
std::string table_line(const std::string& doc, const std::string& start) {
  const std::size_t at = doc.find("\n" + start);
  REQUIRE(at != std::string::npos);
  return doc.substr(at + 1, doc.find('\n', at + 1) - at);
}

// Every HOROVOD_<NAME> in `text`, in order.
std::vector<std::string> horovod_variables(const std::string& text) {
  std::vector<std::string> names;
  for (std::size_t at = text.find("HOROVOD_"); at != std::string::npos;
       at = text.find("HOROVOD_", at + 1)) {
    if (at > 0 && is_name_char(text[at - 1])) continue;
    std::size_t end = at + 8;
    while (end < text.size() && is_name_char(text[end])) ++end;
    if (end > at + 8) names.push_back(text.substr(at, end - at));
  }
  return names;
}

// The page's table of Horovod's variables: for each variable of a row's
// first column, the row's second column (what herd does with it).
std::vector<std::pair<std::string, std::string>> horovod_rows(const std::string& doc) {
  std::vector<std::pair<std::string, std::string>> rows;
  std::istringstream lines(doc);
  std::string line;
  bool in_section = false;
  while (std::getline(lines, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Horovod variables";
    if (!in_section || line.rfind("| `HOROVOD_", 0) != 0) continue;
    const std::size_t second = line.find('|', 1);
    const std::size_t third = line.find('|', second + 1);
    if (second == std::string::npos || third == std::string::npos) continue;
    const std::string what = trim(line.substr(second + 1, third - second - 1));
    for (const std::string& name : horovod_variables(line.substr(1, second - 1))) {
      rows.emplace_back(name, what);
    }
  }
  return rows;
}

// Every way the page's table of Horovod's variables and the code disagree:
// each HOROVOD_* alias has a row saying "alias of" (and naming its setting
// where the row names one), each variable that draws a warning a row saying
// "warning", and no variable has two rows.
std::vector<std::string> horovod_table_mismatches(const std::string& doc,
                                                  const std::vector<AliasDoc>& aliases,
                                                  const std::vector<std::string>& warned) {
  std::vector<std::string> problems;
  const std::vector<std::pair<std::string, std::string>> rows = horovod_rows(doc);
  std::set<std::string> seen;
  for (const auto& [name, what] : rows) {
    if (!seen.insert(name).second) problems.push_back(name + " has more than one row");
  }
  auto row_of = [&](const std::string& name) -> const std::string* {
    for (const auto& [row_name, what] : rows) {
      if (row_name == name) return &what;
    }
    return nullptr;
  };
  std::set<std::string> alias_names;
  for (const AliasDoc& alias : aliases) {
    if (alias.variable.rfind("HOROVOD_", 0) != 0) continue;
    alias_names.insert(alias.variable);
    const std::string* what = row_of(alias.variable);
    if (what == nullptr) {
      problems.push_back(alias.variable + " is an alias without a row");
    } else if (what->rfind("alias of", 0) != 0) {
      problems.push_back(alias.variable + " is an alias but its row says '" + *what + "'");
    } else if (what->find("`HERD_") != std::string::npos &&
               what->find("`" + alias.setting + "`") == std::string::npos) {
      problems.push_back(alias.variable + " stands for " + alias.setting + " but its row says '" +
                         *what + "'");
    }
  }
  for (const std::string& name : warned) {
    const std::string* what = row_of(name);
    if (what == nullptr) {
      problems.push_back(name + " draws a warning but has no row");
    } else if (what->rfind("warning", 0) != 0) {
      problems.push_back(name + " draws a warning but its row says '" + *what + "'");
    }
  }
  for (const auto& [name, what] : rows) {
    if (what.rfind("alias of", 0) == 0 && alias_names.count(name) == 0) {
      problems.push_back(name + "'s row says alias, but herd does not read it");
    }
  }
  return problems;
}

}  // namespace

TEST_CASE("configuration.md: the table of Horovod's variables agrees with the code",
          "[config][docs]") {
  const std::string doc = read_file(HERD_CONFIGURATION_DOC);
  REQUIRE_FALSE(doc.empty());
  const std::vector<AliasDoc> aliases = alias_docs();
  const std::vector<std::string> warned = unhonoured_horovod_variables();
  // Rows for the aliases, the warned variables and those accepted silently.
  CHECK(horovod_rows(doc).size() > aliases.size() + warned.size());
  std::string all;
  for (const std::string& problem : horovod_table_mismatches(doc, aliases, warned)) {
    all += "\n  " + problem;
  }
  INFO("docs/configuration.md disagrees with src/config_settings.cc:" << all);
  CHECK(all.empty());

  SECTION("tampered copies are rejected") {
    const std::string row = table_line(doc, "| `HOROVOD_CYCLE_TIME` |");
    CHECK(horovod_table_mismatches(replaced(doc, row, ""), aliases, warned) ==
          std::vector<std::string>{"HOROVOD_CYCLE_TIME is an alias without a row"});
    CHECK(horovod_table_mismatches(
              replaced(doc, row, replaced(row, "`HERD_CYCLE_TIME`", "`HERD_CACHE_CAPACITY`")),
              aliases, warned) ==
          std::vector<std::string>{"HOROVOD_CYCLE_TIME stands for HERD_CYCLE_TIME but its row says "
                                   "'alias of `HERD_CACHE_CAPACITY`'"});
    CHECK(horovod_table_mismatches(replaced(doc, row, row + row), aliases, warned) ==
          std::vector<std::string>{"HOROVOD_CYCLE_TIME has more than one row"});
    const std::string controller = table_line(doc, "| `HOROVOD_CONTROLLER` |");
    CHECK(horovod_table_mismatches(
              replaced(doc, controller,
                       replaced(controller, "| warning unless `mpi` (any case) |",
                                "| accepted silently |")),
              aliases, warned) ==
          std::vector<std::string>{
              "HOROVOD_CONTROLLER draws a warning but its row says 'accepted silently'"});
    const std::string dynamic = table_line(doc, "| `HOROVOD_DYNAMIC_PROCESS_SETS` |");
    CHECK(horovod_table_mismatches(replaced(doc, dynamic,
                                            replaced(dynamic, "| accepted silently |",
                                                     "| alias of herd's process sets |")),
                                   aliases, warned) ==
          std::vector<std::string>{
              "HOROVOD_DYNAMIC_PROCESS_SETS's row says alias, but herd does not read it"});
  }
}

TEST_CASE("configuration.md: agrees with the settings table", "[config][docs]") {
  const std::string doc = read_file(HERD_CONFIGURATION_DOC);
  INFO("reading " << HERD_CONFIGURATION_DOC);
  REQUIRE_FALSE(doc.empty());
  const std::vector<SettingDoc> table = setting_docs();
  CHECK(settings_rows(doc).size() == table.size());
  const std::vector<std::string> problems = doc_mismatches(doc, table);
  std::string all;
  for (const std::string& problem : problems) all += "\n  " + problem;
  INFO("docs/configuration.md disagrees with src/config_settings.cc:" << all);
  CHECK(problems.empty());
}

TEST_CASE("configuration.md: tampered copies are rejected", "[config][docs]") {
  const std::string doc = read_file(HERD_CONFIGURATION_DOC);
  REQUIRE_FALSE(doc.empty());
  const std::vector<SettingDoc> table = setting_docs();
  REQUIRE(doc_mismatches(doc, table).empty());

  SECTION("a setting's row removed") {
    // HERD_CYCLE_TIME is named elsewhere on the page too: only its row is missing.
    const std::string row = table_line(doc, "| `HERD_CYCLE_TIME` |");
    CHECK(doc_mismatches(replaced(doc, row, ""), table) ==
          std::vector<std::string>{"HERD_CYCLE_TIME has no row in the page's Settings table"});
  }
  SECTION("a variable that is no setting") {
    const std::string row = table_line(doc, "| `HERD_CYCLE_TIME` |");
    const std::string bogus = replaced(row, "HERD_CYCLE_TIME", "HERD_CYCLE_TIMES");
    CHECK(
        doc_mismatches(replaced(doc, row, row + bogus), table) ==
        std::vector<std::string>{"HERD_CYCLE_TIMES is on the page but not in the settings table"});
  }
  SECTION("a setting missing from the page") {
    std::vector<SettingDoc> more = table;
    more.push_back({"HERD_NEW_KNOB", "0", "A knob only the table has.", false});
    CHECK(doc_mismatches(doc, more) ==
          std::vector<std::string>{"HERD_NEW_KNOB is in the settings table but not on the page",
                                   "HERD_NEW_KNOB has no row in the page's Settings table"});
  }
  SECTION("another default") {
    const std::string row = table_line(doc, "| `HERD_CACHE_CAPACITY` |");
    CHECK(doc_mismatches(replaced(doc, row, replaced(row, "| `1024` |", "| `2048` |")), table) ==
          std::vector<std::string>{
              "HERD_CACHE_CAPACITY: the page's default is '2048', the table's '1024'"});
  }
  SECTION("two rows swapped") {
    const std::string first = table_line(doc, "| `HERD_FUSION_THRESHOLD` |");
    const std::string second = table_line(doc, "| `HERD_FUSION_MAX_TENSOR_BYTES` |");
    CHECK(doc_mismatches(replaced(doc, first + second, second + first), table) ==
          std::vector<std::string>{"the page's Settings table lists the settings in another "
                                   "order than the settings table"});
  }
  SECTION("a compared setting left off the page's list") {
    CHECK(doc_mismatches(off_compared_list(doc, "HERD_GPU_STAGING_BYTES"), table) ==
          std::vector<std::string>{
              "HERD_GPU_STAGING_BYTES is compared across ranks but missing from the page's "
              "list"});
  }
  SECTION("a setting that may differ on the page's list") {
    std::vector<SettingDoc> changed = table;
    for (SettingDoc& setting : changed) {
      if (setting.variable == "HERD_GPU_STAGING_BYTES") setting.compared_across_ranks = false;
    }
    CHECK(doc_mismatches(doc, changed) ==
          std::vector<std::string>{
              "HERD_GPU_STAGING_BYTES is on the page's list of compared settings but is not "
              "compared"});
  }
}

}  // namespace herd::detail

// The docs' table of settings (docs/configuration.md), made from the
// settings table (settings_table.h), so the documentation cannot drift from
// the code.
//
//   bazel run //runtime:settings_doc                      # prints the table
//   bazel run //runtime:settings_doc -- --write $PWD/docs/configuration.md
//   settings_doc --check docs/configuration.md            # settings_doc_test
//
// The table lies in the file between kBegin and kEnd.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "runtime/config.h"

namespace {

const char kBegin[] = "<!-- settings: made by `bazel run //runtime:settings_doc -- --write $PWD/docs/configuration.md` -->\n";
const char kEnd[] = "<!-- end of settings -->\n";

std::string table() {
  std::string out =
      "| variable | `kolo_config_t` field | default | meaning |\n"
      "| --- | --- | --- | --- |\n";
  for (const kolo::SettingInfo* s = kolo::settings_begin(); s != kolo::settings_end(); ++s) {
    out += "| `" + std::string(s->variable) + "` | `" + s->field + "` | " + s->shown_default + " | " + s->meaning +
           " |\n";
  }
  return out;
}

bool read(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream all;
  all << in.rdbuf();
  *text = all.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string generated = table();
  if (argc == 1) {
    std::cout << generated;
    return 0;
  }
  const std::string mode = argv[1];
  if (argc != 3 || (mode != "--check" && mode != "--write")) {
    std::cerr << "usage: settings_doc [--check FILE | --write FILE]\n";
    return 2;
  }
  std::string text;
  if (!read(argv[2], &text)) {
    std::cerr << "settings_doc: cannot read " << argv[2] << "\n";
    return 2;
  }
  const size_t begin = text.find(kBegin);
  const size_t end = text.find(kEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    std::cerr << "settings_doc: " << argv[2] << " has no block between\n  " << kBegin << "and\n  " << kEnd;
    return 2;
  }
  const size_t body = begin + sizeof(kBegin) - 1;
  if (mode == "--check") {
    if (text.compare(body, end - body, generated) == 0) return 0;
    std::cerr << argv[2] << "'s settings table differs from runtime/settings_table.h. It should read:\n"
              << generated << "Update it with `bazel run //runtime:settings_doc -- --write $PWD/" << argv[2]
              << "`.\n";
    return 1;
  }
  text.replace(body, end - body, generated);
  std::ofstream out(argv[2]);
  out << text;
  return out ? 0 : 2;
}

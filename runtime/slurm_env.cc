#include "runtime/slurm_env.h"

#include <cstdint>

namespace kolo {
namespace {

constexpr uint64_t kMaxNumber = 1000000000ULL;  // no host index is this large

// One bracket's numbers: "01-04" -> lo 1, hi 4, width 2.
struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  size_t width = 0;
  uint64_t count() const { return hi - lo + 1; }
};

// A hostlist entry: literal text interleaved with bracket groups.
// parts[i] is literal text; groups[i] (if any) follows parts[i].
struct Pattern {
  std::vector<std::string> literals;       // literals.size() == groups.size() + 1
  std::vector<std::vector<Range>> groups;  // each group: its ranges in order
};

Status bad(const std::string& text, const std::string& why) {
  return invalid_argument("malformed Slurm hostlist '" + text + "': " + why);
}

bool parse_number(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 9) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// Parses "01-04,07" (the inside of one bracket).
Status parse_group(const std::string& text, const std::string& inside, std::vector<Range>* ranges) {
  size_t start = 0;
  while (start <= inside.size()) {
    size_t comma = inside.find(',', start);
    std::string item = inside.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = item.find('-');
    Range r;
    std::string lo = dash == std::string::npos ? item : item.substr(0, dash);
    std::string hi = dash == std::string::npos ? item : item.substr(dash + 1);
    if (!parse_number(lo, &r.lo) || !parse_number(hi, &r.hi)) return bad(text, "'" + item + "' is not N or N-M");
    if (r.hi < r.lo) return bad(text, "range '" + item + "' runs backwards");
    if (r.hi >= kMaxNumber) return bad(text, "number too large in '" + item + "'");
    r.width = lo.size();
    ranges->push_back(r);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::ok();
}

// Splits the list at top-level commas (commas inside brackets belong to the
// bracket) and parses each entry.
Status parse_hostlist(const std::string& text, std::vector<Pattern>* patterns) {
  if (text.empty()) return bad(text, "empty");
  Pattern p;
  p.literals.emplace_back();
  size_t i = 0;
  while (i <= text.size()) {
    if (i == text.size() || text[i] == ',') {
      if (p.literals.size() == 1 && p.literals[0].empty()) return bad(text, "empty host name");
      patterns->push_back(std::move(p));
      p = Pattern();
      p.literals.emplace_back();
      if (i == text.size()) break;
      ++i;
      continue;
    }
    if (text[i] == '[') {
      size_t close = text.find(']', i);
      if (close == std::string::npos) return bad(text, "'[' without ']'");
      std::string inside = text.substr(i + 1, close - i - 1);
      if (inside.find('[') != std::string::npos) return bad(text, "nested '['");
      std::vector<Range> ranges;
      KOLO_RETURN_IF_ERROR(parse_group(text, inside, &ranges));
      p.groups.push_back(std::move(ranges));
      p.literals.emplace_back();
      i = close + 1;
      continue;
    }
    if (text[i] == ']') return bad(text, "']' without '['");
    if (static_cast<unsigned char>(text[i]) <= ' ') return bad(text, "blank or control character");
    p.literals.back() += text[i];
    ++i;
  }
  return Status::ok();
}

std::string padded(uint64_t v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// The n-th value of a group (0-based), n below the group's total count.
std::string group_value(const std::vector<Range>& group, uint64_t n) {
  for (const Range& r : group) {
    if (n < r.count()) return padded(r.lo + n, r.width);
    n -= r.count();
  }
  return std::string();  // unreachable for n in range
}

uint64_t group_count(const std::vector<Range>& group) {
  uint64_t total = 0;
  for (const Range& r : group) total += r.count();  // each < 1e9, few of them: no overflow in practice
  return total;
}

}  // namespace

Status expand_hostlist(const std::string& text, size_t limit, std::vector<std::string>* hosts) {
  std::vector<Pattern> patterns;
  KOLO_RETURN_IF_ERROR(parse_hostlist(text, &patterns));
  std::vector<std::string> out;
  for (const Pattern& p : patterns) {
    // Count first, so a huge product is refused before it is built.
    std::vector<uint64_t> counts;
    uint64_t product = 1;
    for (const auto& g : p.groups) {
      uint64_t c = group_count(g);
      if (c > limit || product > limit / c) return bad(text, "more than " + std::to_string(limit) + " hosts");
      product *= c;
      counts.push_back(c);
    }
    if (out.size() + product > limit) return bad(text, "more than " + std::to_string(limit) + " hosts");
    for (uint64_t k = 0; k < product; ++k) {
      // Mixed radix, the last group fastest.
      std::vector<uint64_t> digit(counts.size());
      uint64_t rest = k;
      for (size_t g = counts.size(); g-- > 0;) {
        digit[g] = rest % counts[g];
        rest /= counts[g];
      }
      std::string host = p.literals[0];
      for (size_t g = 0; g < p.groups.size(); ++g) host += group_value(p.groups[g], digit[g]) + p.literals[g + 1];
      out.push_back(std::move(host));
    }
  }
  *hosts = std::move(out);
  return Status::ok();
}

Status first_host(const std::string& text, std::string* host) {
  std::vector<Pattern> patterns;
  KOLO_RETURN_IF_ERROR(parse_hostlist(text, &patterns));
  const Pattern& p = patterns.front();
  std::string h = p.literals[0];
  for (size_t g = 0; g < p.groups.size(); ++g) h += group_value(p.groups[g], 0) + p.literals[g + 1];
  *host = h;
  return Status::ok();
}

Status expand_tasks_per_node(const std::string& text, size_t limit, std::vector<int>* counts) {
  std::vector<int> out;
  auto fail = [&](const std::string& why) {
    return invalid_argument("malformed Slurm tasks-per-node list '" + text + "': " + why);
  };
  if (text.empty()) return fail("empty");
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    uint64_t tasks = 0;
    uint64_t repeat = 1;
    size_t paren = item.find('(');
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') {
        return fail("'" + item + "' is not N or N(xM)");
      }
      if (!parse_number(item.substr(paren + 2, item.size() - paren - 3), &repeat) || repeat == 0) {
        return fail("bad repeat count in '" + item + "'");
      }
    }
    if (!parse_number(item.substr(0, paren), &tasks) || tasks > (1u << 24)) return fail("bad task count in '" + item + "'");
    if (repeat > limit || out.size() + repeat > limit) return fail("more than " + std::to_string(limit) + " nodes");
    out.insert(out.end(), repeat, static_cast<int>(tasks));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  *counts = std::move(out);
  return Status::ok();
}

int slurm_port(const std::string& job_id, const std::string& step_id) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a
  for (char c : job_id + "." + step_id) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return 20000 + static_cast<int>(h % 12000);
}

}  // namespace kolo

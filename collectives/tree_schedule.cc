#include "collectives/tree_schedule.h"

#include <algorithm>

namespace kolo {
namespace {

int lowest_set_bit(int r) { return r & -r; }

TreeLinks binary_tree_links(int n, int r) {
  TreeLinks links;
  if (n < 2) return links;
  if (r == 0) {
    int top = 1;
    while (top * 2 < n) top *= 2;
    links.children.push_back(top);
    return links;
  }
  const int b = lowest_set_bit(r);
  const int up = r + b;
  links.parent = (up < n && lowest_set_bit(up) == 2 * b) ? up : r - b;
  if (b > 1) {
    links.children.push_back(r - b / 2);
    for (int d = b / 2; d >= 1; d /= 2) {
      if (r + d < n) {
        links.children.push_back(r + d);
        break;
      }
    }
  }
  return links;
}

// The second tree relabels the first: rank r of tree 1 sits where rank
// to_first(r) sits in tree 0.
int to_first(int n, int r) { return n % 2 == 0 ? n - 1 - r : (r + n - 1) % n; }
int from_first(int n, int r) { return n % 2 == 0 ? n - 1 - r : (r + 1) % n; }

}  // namespace

TreeLinks double_tree_links(int n, int r, int tree) {
  if (tree == 0) return binary_tree_links(n, r);
  TreeLinks first = binary_tree_links(n, to_first(n, r));
  TreeLinks links;
  if (first.parent >= 0) links.parent = from_first(n, first.parent);
  for (int c : first.children) links.children.push_back(from_first(n, c));
  return links;
}

int double_tree_root(int n, int tree) { return tree == 0 || n < 2 ? 0 : from_first(n, 0); }

int double_tree_depth(int n) {
  // Both trees have tree 0's shape: its deepest rank's distance to rank 0.
  int depth = 0;
  for (int r = 1; r < n; ++r) {
    int d = 0;
    for (int q = r; q != 0; q = binary_tree_links(n, q).parent) ++d;
    depth = std::max(depth, d);
  }
  return depth;
}

int double_tree_host_load(int n, int per_host) {
  if (n < 2 || per_host < 1) return 0;
  const int hosts = (n + per_host - 1) / per_host;
  std::vector<int> out(hosts, 0), in(hosts, 0);
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < n; ++r) {
      const int parent = double_tree_links(n, r, t).parent;
      if (parent < 0 || parent / per_host == r / per_host) continue;
      ++out[r / per_host];     // up: r's sums to its parent (down: the other way)
      ++in[parent / per_host];
    }
  }
  int load = 0;
  for (int h = 0; h < hosts; ++h) load = std::max({load, out[h], in[h]});
  return load;
}

}  // namespace kolo

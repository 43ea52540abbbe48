// The latency tree's shape as pure functions of (rank, size), as
// ring_schedule.h is the ring's: no I/O, so it is tested (and simulated,
// bench/simulator.h) without a network.
//
// Two binary trees over the same ranks (NCCL's double binary tree): each
// carries half of the buffer, reduced up to its root and broadcast back
// down, in segments so that every level works at once. A binary tree's
// leaves are half its ranks and send but never receive while reducing;
// the second tree makes those ranks its inner nodes (mirrored when the
// size is even, shifted by one when odd), so every rank's links carry
// about the same bytes, and depth is log2(N) where the ring has N - 1 hops.
//
// The first tree is the in-order binary tree over 0..N-1 that the lowest
// set bit draws: rank r with lowest set bit b has children r - b/2 and
// r + b/2 (the latter, when past the end, the nearest of r + b/4, ...,
// r + 1 that exists) and its parent is whichever of r - b and r + b has
// lowest set bit 2b (r - b when r + b is past the end). Rank 0 is the root,
// with one child: the largest power of two below N.
#pragma once

#include <vector>

namespace kolo {

struct TreeLinks {
  int parent = -1;            // -1: the root
  std::vector<int> children;  // zero, one or two, in the order their data is reduced
};

// Rank `rank`'s place in tree `tree` (0 or 1) of the double binary tree
// over `size` ranks.
TreeLinks double_tree_links(int size, int rank, int tree);

// The root of tree `tree`.
int double_tree_root(int size, int tree);

// Levels below the root of the deeper of the two trees (0 for one rank).
int double_tree_depth(int size);

// With ranks placed on hosts in blocks of `ranks_per_host`: the most
// segments that one step (a segment of each tree) sends over one host's
// network link in either direction, counting the tree edges that leave or
// enter the host. What a host's link carries per step, where a rank alone
// on its host carries 2 (two in as an inner node of one tree, one out to
// its parent there and one as a leaf of the other).
int double_tree_host_load(int size, int ranks_per_host);

}  // namespace kolo

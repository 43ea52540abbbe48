// The two CPUs that bench/core_round_trip and bench/core_traffic run their
// two threads on: given as arguments, or the first two this process may use.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>

namespace kolo {

// Runs the calling thread on `cpu` alone; false where it may not.
inline bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// `program [CPU_A CPU_B]`: fills `cpus`, or says how to call `program` and
// returns false where there are not two different CPUs.
inline bool two_cpus(int argc, char** argv, const char* program, int cpus[2]) {
  cpus[0] = cpus[1] = -1;
  if (argc == 3) {
    cpus[0] = std::atoi(argv[1]);
    cpus[1] = std::atoi(argv[2]);
  } else {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
      for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; ++c) {
        if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
      }
    }
  }
  if (cpus[0] < 0 || cpus[1] < 0 || cpus[0] == cpus[1]) {
    std::fprintf(stderr, "usage: %s [CPU_A CPU_B] (two different CPUs; this machine needs two)\n", program);
    return false;
  }
  return true;
}

}  // namespace kolo

// The engine's link in a job: a sibling of the caller's communicator
// (Communicator::create_sibling, keys under "engine/", every pair connected
// for alltoall), so that named operations never interleave with the
// caller's own collectives. The round token is an empty message around
// the ring with a tag of its own.
#pragma once

#include <memory>

#include "runtime/communicator.h"
#include "runtime/engine.h"
#include "runtime/engine_link.h"

namespace kolo {

// What an Engine over `parent`'s ranks connects with. parent must outlive
// the engine.
EngineConnector sibling_engine_connector(Communicator* parent);
// The engine of `parent`'s named operations, over that link.
std::unique_ptr<Engine> make_sibling_engine(Communicator* parent);

}  // namespace kolo

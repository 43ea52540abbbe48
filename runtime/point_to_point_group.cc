#include "runtime/point_to_point_group.h"

#include "runtime/communicator.h"

namespace kolo {

PointToPointGroup& PointToPointGroup::of_this_thread() {
  thread_local PointToPointGroup group;
  return group;
}

Status PointToPointGroup::add(Communicator* comm, const PointToPoint& op, std::shared_ptr<OpHandle> done) {
  KOLO_RETURN_IF_ERROR(comm->check_point_to_point(op));
  Batch* batch = nullptr;
  for (auto& b : batches_) {
    if (b.first == comm) batch = &b.second;
  }
  if (!batch) {
    batches_.push_back({comm, Batch{}});
    batch = &batches_.back().second;
  }
  batch->ops.push_back(op);
  if (done) {
    batch->done.push_back(std::move(done));
  } else {
    batch->blocking = true;
  }
  return Status::ok();
}

Status PointToPointGroup::end() {
  if (depth_ == 0) return invalid_usage("kolo_group_end without kolo_group_start");
  if (--depth_ > 0) return Status::ok();
  auto batches = std::move(batches_);
  batches_.clear();
  Status first = Status::ok();
  for (auto& b : batches) {
    Status s = post(b.first, std::move(b.second));
    if (first.is_ok()) first = s;
  }
  return first;
}

Status PointToPointGroup::post(Communicator* comm, Batch batch) {
  Launch launch;
  if (!batch.blocking) launch.done = batch.done;
  Status s = comm->point_to_point(batch.ops, std::move(launch));
  // Blocking, or not queued at all: the handles learn the result here.
  if (batch.blocking || !s.is_ok()) {
    for (const auto& h : batch.done) h->complete(s);
  }
  return s;
}

}  // namespace kolo

#include "runtime/op_request.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "collectives/dtype.h"
#include "collectives/wire_format.h"

namespace kolo {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce: return "allreduce";
    case OpKind::kAllgather: return "allgather";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAlltoall: return "alltoall";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kJoin: return "join";
    case OpKind::kShutdown: return "shutdown";
    case OpKind::kStallAbort: return "stall abort";
  }
  return "unknown operation";
}

bool OpRequest::operator==(const OpRequest& o) const {
  return name == o.name && kind == o.kind && dtype == o.dtype && op == o.op && root == o.root &&
         prescale == o.prescale && postscale == o.postscale && wire == o.wire &&
         error_feedback == o.error_feedback && on_device == o.on_device && shapes == o.shapes && splits == o.splits;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t row_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

namespace {

bool reduces(OpKind k) { return k == OpKind::kAllreduce || k == OpKind::kReduceScatter; }
bool per_rank_rows(OpKind k) { return k == OpKind::kAllgather || k == OpKind::kAlltoall; }

// Shapes as every rank must share them: without the first dimension where
// that is each rank's own.
std::vector<std::vector<int64_t>> shared_shapes(const OpRequest& r) {
  if (!per_rank_rows(r.kind)) return r.shapes;
  std::vector<std::vector<int64_t>> out;
  for (const auto& s : r.shapes) out.emplace_back(s.empty() ? s.begin() : s.begin() + 1, s.end());
  return out;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

std::string first_difference(const OpRequest& a, const OpRequest& b) {
  if (a.kind != b.kind) return "operation";
  if (a.dtype != b.dtype) return "dtype";
  if (reduces(a.kind) && a.op != b.op) return "op";
  if (a.kind == OpKind::kBroadcast && a.root != b.root) return "root";
  if (reduces(a.kind) && a.prescale != b.prescale) return "prescale factor";
  if (reduces(a.kind) && a.postscale != b.postscale) return "postscale factor";
  if (a.kind == OpKind::kAllreduce && a.wire != b.wire) return "wire format";
  if (a.kind == OpKind::kAllreduce && a.error_feedback != b.error_feedback) return "error feedback";
  if (a.on_device != b.on_device) return "memory";
  if (a.shapes.size() != b.shapes.size()) return "number of tensors";
  if (shared_shapes(a) != shared_shapes(b)) return per_rank_rows(a.kind) ? "shape after the first dimension" : "shape";
  return "";
}

std::string field_value(const OpRequest& r, const std::string& field) {
  std::ostringstream os;
  if (field == "operation") {
    os << op_kind_name(r.kind);
  } else if (field == "dtype") {
    os << (valid_dtype(r.dtype) ? dtype_name(static_cast<DataType>(r.dtype)) : "unknown");
  } else if (field == "op") {
    os << (valid_op(r.op) ? op_name(static_cast<ReduceOp>(r.op)) : "unknown");
  } else if (field == "root") {
    os << r.root;
  } else if (field == "prescale factor") {
    os << r.prescale;
  } else if (field == "postscale factor") {
    os << r.postscale;
  } else if (field == "wire format") {
    os << (r.wire < 0 ? "the communicator's" : valid_wire_format(r.wire) ? wire_format_name(static_cast<WireFormat>(r.wire))
                                                                         : "unknown");
  } else if (field == "error feedback") {
    os << (r.error_feedback ? "on" : "off");
  } else if (field == "memory") {
    os << (r.on_device ? "GPU" : "host");
  } else if (field == "number of tensors") {
    os << r.shapes.size();
  } else {
    auto shapes = field == "shape" ? r.shapes : shared_shapes(r);
    for (size_t i = 0; i < shapes.size(); ++i) os << (i ? " " : "") << shape_text(shapes[i]);
  }
  return os.str();
}

namespace {

// Little-endian fixed-width fields; strings and vectors with a u32 length.
class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void i64s(const std::vector<int64_t>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) i64(x);
  }
  std::string take() { return std::move(out_); }

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  bool u8(uint8_t* v) { return raw(v, 1); }
  bool u32(uint32_t* v) { return raw(v, 4); }
  bool i32(int32_t* v) { return raw(v, 4); }
  bool i64(int64_t* v) { return raw(v, 8); }
  bool f64(double* v) { return raw(v, 8); }
  bool str(std::string* s) {
    uint32_t n;
    if (!u32(&n) || n > left()) return false;
    s->assign(in_, pos_, n);
    pos_ += n;
    return true;
  }
  bool i64s(std::vector<int64_t>* v) {
    uint32_t n;
    if (!u32(&n) || n > left() / 8) return false;
    v->resize(n);
    for (auto& x : *v) i64(&x);
    return true;
  }
  size_t left() const { return in_.size() - pos_; }

 private:
  bool raw(void* p, size_t n) {
    if (left() < n) return false;
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace

std::string encode_requests(const std::vector<OpRequest>& requests) {
  Writer w;
  w.u32(static_cast<uint32_t>(requests.size()));
  for (const auto& r : requests) {
    w.str(r.name);
    w.u8(static_cast<uint8_t>(r.kind));
    w.i32(r.dtype);
    w.i32(r.op);
    w.i32(r.root);
    w.f64(r.prescale);
    w.f64(r.postscale);
    w.i32(r.wire);
    w.u8(r.error_feedback ? 1 : 0);
    w.u8(r.on_device ? 1 : 0);
    w.u32(static_cast<uint32_t>(r.shapes.size()));
    for (const auto& s : r.shapes) w.i64s(s);
    w.i64s(r.splits);
  }
  return w.take();
}

// Every value at least 0, and their product (a shape's elements) and sum
// (splits' rows) within int64_t.
static bool countable(const std::vector<int64_t>& values) {
  int64_t product = 1, sum = 0;
  for (int64_t v : values) {
    if (v < 0 || __builtin_mul_overflow(product, v, &product) || __builtin_add_overflow(sum, v, &sum)) return false;
  }
  return true;
}

Status decode_requests(const std::string& bytes, std::vector<OpRequest>* out) {
  Reader rd(bytes);
  out->clear();
  uint32_t n;
  // Every request takes at least 47 bytes, which bounds n before reserving.
  if (!rd.u32(&n) || n > rd.left() / 47) return internal_error("negotiation message: bad request count");
  for (uint32_t i = 0; i < n; ++i) {
    OpRequest r;
    uint8_t kind;
    uint32_t tensors;
    uint8_t feedback = 0, on_device = 0;
    bool ok = rd.str(&r.name) && rd.u8(&kind) && rd.i32(&r.dtype) && rd.i32(&r.op) && rd.i32(&r.root) &&
              rd.f64(&r.prescale) && rd.f64(&r.postscale) && rd.i32(&r.wire) && rd.u8(&feedback) &&
              rd.u8(&on_device) && rd.u32(&tensors) && tensors <= rd.left() / 4;
    r.error_feedback = feedback != 0;
    r.on_device = on_device != 0;
    if (!ok || kind < 1 || kind > kMaxOpKind) return internal_error("negotiation message: truncated or bad request");
    r.kind = static_cast<OpKind>(kind);
    // Submissions refuse scale factors that are not finite (submission.cc).
    if (!std::isfinite(r.prescale) || !std::isfinite(r.postscale)) {
      return internal_error("negotiation message: a scale factor that is not finite");
    }
    r.shapes.resize(tensors);
    for (auto& s : r.shapes) {
      if (!rd.i64s(&s)) return internal_error("negotiation message: truncated shape");
      // What a rank submits has passed the submission checks: a negative
      // dimension, or one whose product overflows, is a damaged message.
      if (!countable(s)) return internal_error("negotiation message: a shape with a negative or overflowing size");
    }
    if (!rd.i64s(&r.splits)) return internal_error("negotiation message: truncated splits");
    if (!countable(r.splits)) return internal_error("negotiation message: negative or overflowing splits");
    out->push_back(std::move(r));
  }
  if (rd.left() != 0) return internal_error("negotiation message: trailing bytes");
  return Status::ok();
}

}  // namespace kolo

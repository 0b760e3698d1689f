// RAII HDF5 handles and the few dataset/attribute operations Sieve's files need.
//
// Files opened with a Comm of size > 1 use the MPI-IO driver and collective transfers:
// every rank must then make the same create/attribute calls, and every rank must call
// write_rows/read_rows (a rank with nothing to do passes count 0). HDF5's own error
// printing is switched off; failures become sieve::Error naming the file and object.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "util/error.hpp"

namespace sieve::h5 {

// Owning hid_t with the matching close function.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset();
  // Give up ownership without closing (for a close whose failure must be reported).
  hid_t release() {
    hid_t id = id_;
    id_ = -1;
    return id;
  }
  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

template <typename T>
hid_t native_type();

// Element type as a short name ("uint8", "int32", "int64", "float32", "float64", "string", "other").
std::string type_name(hid_t type);

class File {
 public:
  File() = default;
  File(File&&) = default;
  File& operator=(File&&) = default;
  // A file shared by several ranks (MPI-IO) that goes out of scope while an exception is
  // in flight is abandoned, not closed: closing is collective, and after a failed write
  // (disk full) the ranks' HDF5 states differ, so a collective close never completed on
  // them all (the job spun at 100 % CPU). The file is a temporary that AtomicOutput
  // removes; the process ends right after (no HDF5 shutdown at exit, see h5.cpp).
  ~File();
  // Create (truncate) `path`. With comm->size() > 1 the file is shared by all ranks.
  static File create(const std::string& path, const Comm* comm = nullptr);
  // Open read-only. Missing or non-HDF5 files give an Error naming the path.
  static File open(const std::string& path, const Comm* comm = nullptr);
  static File open_rw(const std::string& path, const Comm* comm = nullptr);
  // Wrap an already-open file id (takes ownership).
  static File adopt(const std::string& path, Handle h, bool parallel);

  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }
  bool parallel() const { return parallel_; }

  bool exists(const std::string& object) const;
  void create_group(const std::string& group);

  // Dataset [dims...] of T, chunked by `chunk_rows` whole rows (0: contiguous).
  template <typename T>
  void create_dataset(const std::string& name, const std::vector<hsize_t>& dims,
                      hsize_t chunk_rows = 0);
  // Write rows [row0, row0+count) of a dataset; `data` holds count * row_size elements.
  template <typename T>
  void write_rows(const std::string& name, hsize_t row0, hsize_t count, const T* data);
  template <typename T>
  void read_rows(const std::string& name, hsize_t row0, hsize_t count, T* data) const;
  // Whole dataset (every rank reads all of it).
  template <typename T>
  std::vector<T> read_all(const std::string& name) const;
  // Create + write a small dataset in one go (all ranks call it; rank 0's data is written).
  template <typename T>
  void write_small(const std::string& name, const std::vector<hsize_t>& dims,
                   const std::vector<T>& data);

  std::vector<hsize_t> dims(const std::string& name) const;
  std::string dtype(const std::string& name) const;
  // Throws Error "FILE: dataset NAME: expected TYPE[rank dims], found ..." when wrong.
  template <typename T>
  std::vector<hsize_t> require(const std::string& name, int rank) const;

  // Attributes on the object `obj` ("/" for the root, or a group/dataset path).
  void set_attr(const std::string& obj, const std::string& name, const std::string& value);
  void set_attr(const std::string& obj, const std::string& name, int64_t value);
  void set_attr(const std::string& obj, const std::string& name, double value);
  void set_attr(const std::string& obj, const std::string& name, const std::vector<double>& v);
  void set_attr(const std::string& obj, const std::string& name, const std::vector<int64_t>& v);
  void set_attr(const std::string& obj, const std::string& name,
                const std::vector<std::string>& v);
  bool has_attr(const std::string& obj, const std::string& name) const;
  std::string attr_string(const std::string& obj, const std::string& name) const;
  int64_t attr_int(const std::string& obj, const std::string& name) const;
  double attr_double(const std::string& obj, const std::string& name) const;
  std::vector<double> attr_doubles(const std::string& obj, const std::string& name) const;
  std::vector<int64_t> attr_ints(const std::string& obj, const std::string& name) const;
  std::vector<std::string> attr_strings(const std::string& obj, const std::string& name) const;

  void flush();
  void close();

 private:
  Handle open_object(const std::string& obj) const;
  Handle transfer_plist() const;
  std::string where(const std::string& name) const { return path_ + ": " + name; }
  std::string path_;
  Handle file_;
  bool parallel_ = false;
};

// Stamp the provenance every Sieve file carries: `schema`, `sieve_version`, `created_by`,
// and the resolved `config` (YAML text).
void stamp(File& f, const std::string& schema, const std::string& config_yaml);
// Check the `schema` attribute ("sieve.dataset/1"): a file of another kind or version,
// or no Sieve file at all, gives an Error naming the file and what was expected.
void require_schema(const File& f, const std::string& schema);

}  // namespace sieve::h5

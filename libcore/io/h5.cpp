#include "io/h5.hpp"

#include <cstring>
#include <exception>
#include <filesystem>

#include "comm/h5_mpio.hpp"

namespace sieve::h5 {
namespace {

// Silence HDF5's stderr error stack once: we report errors ourselves.
// No library shutdown at exit either (H5dont_atexit must come before any other call):
// after a close that failed (disk full) the file's id is half torn down, and the atexit
// shutdown closing it again segfaulted in H5F__close_cb. Every file is closed by its
// RAII owner before exit, so the shutdown has nothing left to flush.
struct QuietErrors {
  QuietErrors() {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
};
const QuietErrors quiet_errors;

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw Error(what);
  return id;
}
void check_status(herr_t rc, const std::string& what) {
  if (rc < 0) throw Error(what);
}

}  // namespace

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && close_) close_(id_);
  id_ = -1;
}

template <> hid_t native_type<uint8_t>() { return H5T_NATIVE_UINT8; }
template <> hid_t native_type<int8_t>() { return H5T_NATIVE_INT8; }
template <> hid_t native_type<int32_t>() { return H5T_NATIVE_INT32; }
template <> hid_t native_type<int64_t>() { return H5T_NATIVE_INT64; }
template <> hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <> hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }

std::string type_name(hid_t t) {
  H5T_class_t c = H5Tget_class(t);
  size_t size = H5Tget_size(t);
  if (c == H5T_INTEGER) {
    bool is_signed = H5Tget_sign(t) == H5T_SGN_2;
    return cat(is_signed ? "int" : "uint", size * 8);
  }
  if (c == H5T_FLOAT) return cat("float", size * 8);
  if (c == H5T_STRING) return "string";
  return "other";
}

namespace {
template <typename T>
std::string expected_name() {
  Handle t(H5Tcopy(native_type<T>()), H5Tclose);
  return type_name(t.get());
}

Handle make_fapl(const Comm* comm) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (comm && comm->size() > 1) set_fapl_mpio(fapl.get(), *comm);
  return fapl;
}
}  // namespace

File File::create(const std::string& path, const Comm* comm) {
  File f;
  f.path_ = path;
  f.parallel_ = comm && comm->size() > 1;
  Handle fapl = make_fapl(comm);
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  if (id < 0) throw Error(cat(path, ": cannot create HDF5 file (is the directory writable?)"));
  f.file_ = Handle(id, H5Fclose);
  return f;
}

static File open_mode(const std::string& path, const Comm* comm, unsigned mode) {
  if (!std::filesystem::exists(path)) throw Error(cat(path, ": no such file"));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(cat(path, ": not an HDF5 file (or truncated)"));
  Handle fapl = make_fapl(comm);
  hid_t id = H5Fopen(path.c_str(), mode, fapl.get());
  if (id < 0) throw Error(cat(path, ": cannot open HDF5 file (corrupt or truncated?)"));
  File f = File::adopt(path, Handle(id, H5Fclose), comm && comm->size() > 1);
  // An index file of virtual datasets (a sharded Sieve dataset) lists its shard files in
  // `shards`: HDF5 reads a missing source file as fill values (zeros) without a word, so
  // every reader, whichever it is, refuses the file here.
  if (f.has_attr("/", "shards")) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    for (const auto& s : f.attr_strings("/", "shards"))
      if (!std::filesystem::is_regular_file(dir / s))
        throw Error(cat(path, ": shard file ", (dir / s).string(), " is missing"));
  }
  return f;
}

File File::adopt(const std::string& path, Handle h, bool parallel) {
  File f;
  f.path_ = path;
  f.file_ = std::move(h);
  f.parallel_ = parallel;
  return f;
}

File File::open(const std::string& path, const Comm* comm) {
  return open_mode(path, comm, H5F_ACC_RDONLY);
}
File File::open_rw(const std::string& path, const Comm* comm) {
  return open_mode(path, comm, H5F_ACC_RDWR);
}

bool File::exists(const std::string& object) const {
  // Walk the path so that a missing intermediate group is "no", not an error.
  std::string partial;
  size_t start = object[0] == '/' ? 1 : 0;
  while (start <= object.size()) {
    size_t slash = object.find('/', start);
    partial = object.substr(0, slash);
    if (partial.empty() || partial == "/") {
      if (slash == std::string::npos) return true;
      start = slash + 1;
      continue;
    }
    if (H5Lexists(file_.get(), partial.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

void File::create_group(const std::string& group) {
  if (exists(group)) return;
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle g(check(H5Gcreate2(file_.get(), group.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                 cat(where(group), ": cannot create group")),
           H5Gclose);
}

Handle File::transfer_plist() const {
  Handle dxpl(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  if (parallel_) H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE);
  return dxpl;
}

template <typename T>
void File::create_dataset(const std::string& name, const std::vector<hsize_t>& dims,
                          hsize_t chunk_rows) {
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (chunk_rows > 0 && !dims.empty() && dims[0] > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::min(chunk_rows, dims[0]);
    H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data());
  }
  // Parallel HDF5 cannot fill values lazily; we always write every element anyway.
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle d(check(H5Dcreate2(file_.get(), name.c_str(), native_type<T>(), space.get(), lcpl.get(),
                            dcpl.get(), H5P_DEFAULT),
                 cat(where(name), ": cannot create dataset")),
           H5Dclose);
}

namespace {
// Select rows [row0, row0+count) of a dataset's file space (none when count == 0).
// `mspace` gets a memory space of the same shape as the selection ([count, dims[1:]]):
// with a flat 1-D memory space HDF5 maps chunked datasets element by element, which
// made reads and writes of chunked image datasets ~20x slower.
Handle select_rows(hid_t dset, hsize_t row0, hsize_t count, hsize_t* row_elems,
                   const std::string& what, Handle* mspace) {
  Handle fspace(H5Dget_space(dset), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(fspace.get());
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
  *row_elems = 1;
  for (int i = 1; i < rank; ++i) *row_elems *= dims[i];
  if (rank == 0 || row0 + count > dims[0])
    throw Error(cat(what, ": rows [", row0, ", ", row0 + count, ") out of range (",
                    rank ? dims[0] : 0, " rows)"));
  if (count == 0) {
    H5Sselect_none(fspace.get());
  } else {
    std::vector<hsize_t> start(rank, 0), cnt = dims;
    start[0] = row0;
    cnt[0] = count;
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr);
  }
  std::vector<hsize_t> mdims = dims;
  mdims[0] = count;
  *mspace = Handle(H5Screate_simple(rank, mdims.data(), nullptr), H5Sclose);
  if (count == 0) H5Sselect_none(mspace->get());
  return fspace;
}

// The open dataset and its row selection (file and memory space) of one row-range I/O.
struct RowIo {
  Handle dset, fspace, mspace;
};

RowIo open_rows(hid_t file, const std::string& name, const std::string& where, hsize_t row0,
                hsize_t count) {
  RowIo io;
  io.dset = Handle(
      check(H5Dopen2(file, name.c_str(), H5P_DEFAULT), cat(where, ": no such dataset")), H5Dclose);
  hsize_t row_elems = 1;
  io.fspace = select_rows(io.dset.get(), row0, count, &row_elems, where, &io.mspace);
  return io;
}
}  // namespace

template <typename T>
void File::write_rows(const std::string& name, hsize_t row0, hsize_t count, const T* data) {
  RowIo io = open_rows(file_.get(), name, where(name), row0, count);
  Handle dxpl = transfer_plist();
  check_status(H5Dwrite(io.dset.get(), native_type<T>(), io.mspace.get(), io.fspace.get(),
                        dxpl.get(), data),
               cat(where(name), ": write failed (disk full or file not writable?)"));
}

template <typename T>
void File::read_rows(const std::string& name, hsize_t row0, hsize_t count, T* data) const {
  RowIo io = open_rows(file_.get(), name, where(name), row0, count);
  Handle dxpl = transfer_plist();
  check_status(H5Dread(io.dset.get(), native_type<T>(), io.mspace.get(), io.fspace.get(),
                       dxpl.get(), data),
               cat(where(name), ": read failed (corrupt or truncated file?)"));
}

template <typename T>
std::vector<T> File::read_all(const std::string& name) const {
  auto dd = dims(name);
  size_t n = 1;
  for (auto x : dd) n *= x;
  std::vector<T> out(n);
  if (dd.empty()) {
    Handle d(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
    check_status(H5Dread(d.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
                 cat(where(name), ": read failed"));
    return out;
  }
  read_rows<T>(name, 0, dd[0], out.data());
  return out;
}

template <typename T>
void File::write_small(const std::string& name, const std::vector<hsize_t>& dims,
                       const std::vector<T>& data) {
  create_dataset<T>(name, dims);
  hsize_t rows = dims.empty() ? 1 : dims[0];
  bool writer = !parallel_ || Comm::world().rank() == 0;
  write_rows<T>(name, 0, writer ? rows : 0, data.data());
}

std::vector<hsize_t> File::dims(const std::string& name) const {
  if (!exists(name)) throw Error(cat(where(name), ": missing dataset"));
  Handle d(check(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), cat(where(name), ": not a dataset")),
           H5Dclose);
  Handle s(H5Dget_space(d.get()), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(s.get());
  std::vector<hsize_t> out(std::max(rank, 0));
  H5Sget_simple_extent_dims(s.get(), out.data(), nullptr);
  return out;
}

std::string File::dtype(const std::string& name) const {
  Handle d(check(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), cat(where(name), ": missing dataset")),
           H5Dclose);
  Handle t(H5Dget_type(d.get()), H5Tclose);
  return type_name(t.get());
}

template <typename T>
std::vector<hsize_t> File::require(const std::string& name, int rank) const {
  auto dd = dims(name);
  std::string found = dtype(name);
  std::string want = expected_name<T>();
  if (found != want || int(dd.size()) != rank) {
    std::string shape;
    for (size_t i = 0; i < dd.size(); ++i) shape += cat(i ? "," : "", dd[i]);
    throw Error(cat(where(name), ": expected ", want, " with ", rank, " dimension(s), found ",
                    found, "[", shape, "]"));
  }
  return dd;
}

Handle File::open_object(const std::string& obj) const {
  if (!exists(obj)) throw Error(cat(where(obj), ": no such object"));
  return Handle(check(H5Oopen(file_.get(), obj.c_str(), H5P_DEFAULT), cat(where(obj), ": cannot open")),
                H5Oclose);
}

namespace {
void replace_attr(hid_t o, const std::string& name) {
  if (H5Aexists(o, name.c_str()) > 0) H5Adelete(o, name.c_str());
}
template <typename T>
void set_numeric_attr(hid_t o, const std::string& name, const std::vector<T>& v, bool scalar,
                      const std::string& what) {
  replace_attr(o, name);
  hsize_t n = v.size();
  Handle space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle a(check(H5Acreate2(o, name.c_str(), native_type<T>(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 what),
           H5Aclose);
  check_status(H5Awrite(a.get(), native_type<T>(), v.data()), what);
}
Handle string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}
}  // namespace

void File::set_attr(const std::string& obj, const std::string& name, const std::string& value) {
  // Scalar dataspace, so that h5py reads a plain str.
  Handle o = open_object(obj);
  replace_attr(o.get(), name);
  Handle t = string_type();
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(check(H5Acreate2(o.get(), name.c_str(), t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 cat(where(obj), ": cannot write attribute ", name)),
           H5Aclose);
  const char* p = value.c_str();
  check_status(H5Awrite(a.get(), t.get(), &p), cat(where(obj), ": cannot write attribute ", name));
}
void File::set_attr(const std::string& obj, const std::string& name, int64_t value) {
  Handle o = open_object(obj);
  set_numeric_attr<int64_t>(o.get(), name, {value}, true, cat(where(obj), ": attribute ", name));
}
void File::set_attr(const std::string& obj, const std::string& name, double value) {
  Handle o = open_object(obj);
  set_numeric_attr<double>(o.get(), name, {value}, true, cat(where(obj), ": attribute ", name));
}
void File::set_attr(const std::string& obj, const std::string& name, const std::vector<double>& v) {
  Handle o = open_object(obj);
  set_numeric_attr<double>(o.get(), name, v, false, cat(where(obj), ": attribute ", name));
}
void File::set_attr(const std::string& obj, const std::string& name, const std::vector<int64_t>& v) {
  Handle o = open_object(obj);
  set_numeric_attr<int64_t>(o.get(), name, v, false, cat(where(obj), ": attribute ", name));
}
void File::set_attr(const std::string& obj, const std::string& name,
                    const std::vector<std::string>& v) {
  Handle o = open_object(obj);
  replace_attr(o.get(), name);
  Handle t = string_type();
  hsize_t n = v.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle a(check(H5Acreate2(o.get(), name.c_str(), t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 cat(where(obj), ": cannot write attribute ", name)),
           H5Aclose);
  std::vector<const char*> ptrs;
  for (auto& s : v) ptrs.push_back(s.c_str());
  check_status(H5Awrite(a.get(), t.get(), ptrs.data()), cat(where(obj), ": attribute ", name));
}

bool File::has_attr(const std::string& obj, const std::string& name) const {
  if (!exists(obj)) return false;
  Handle o = open_object(obj);
  return H5Aexists(o.get(), name.c_str()) > 0;
}

namespace {
Handle open_attr(hid_t o, const std::string& name, const std::string& what) {
  return Handle(check(H5Aopen(o, name.c_str(), H5P_DEFAULT), cat(what, ": missing attribute '", name, "'")),
                H5Aclose);
}
size_t attr_elems(hid_t a) {
  Handle s(H5Aget_space(a), H5Sclose);
  hssize_t n = H5Sget_simple_extent_npoints(s.get());
  return n < 0 ? 0 : size_t(n);
}
template <typename T>
std::vector<T> read_numeric_attr(hid_t o, const std::string& name, const std::string& what) {
  Handle a = open_attr(o, name, what);
  Handle t(H5Aget_type(a.get()), H5Tclose);
  H5T_class_t c = H5Tget_class(t.get());
  if (c != H5T_INTEGER && c != H5T_FLOAT)
    throw Error(cat(what, ": attribute '", name, "' is not numeric"));
  std::vector<T> v(attr_elems(a.get()));
  check_status(H5Aread(a.get(), native_type<T>(), v.data()), cat(what, ": attribute ", name));
  return v;
}
}  // namespace

std::vector<std::string> File::attr_strings(const std::string& obj, const std::string& name) const {
  Handle o = open_object(obj);
  Handle a = open_attr(o.get(), name, where(obj));
  Handle ft(H5Aget_type(a.get()), H5Tclose);
  if (H5Tget_class(ft.get()) != H5T_STRING)
    throw Error(cat(where(obj), ": attribute '", name, "' is not a string"));
  size_t n = attr_elems(a.get());
  std::vector<std::string> out;
  if (H5Tis_variable_str(ft.get()) > 0) {
    Handle t = string_type();
    std::vector<char*> ptrs(n, nullptr);
    check_status(H5Aread(a.get(), t.get(), ptrs.data()), cat(where(obj), ": attribute ", name));
    for (auto* p : ptrs) out.emplace_back(p ? p : "");
    Handle s(H5Aget_space(a.get()), H5Sclose);
    H5Dvlen_reclaim(t.get(), s.get(), H5P_DEFAULT, ptrs.data());
  } else {  // fixed-length strings (as h5py writes numpy bytes)
    size_t len = H5Tget_size(ft.get());
    std::vector<char> buf(n * len);
    check_status(H5Aread(a.get(), ft.get(), buf.data()), cat(where(obj), ": attribute ", name));
    for (size_t i = 0; i < n; ++i) out.emplace_back(strnlen(&buf[i * len], len) ? std::string(&buf[i * len], strnlen(&buf[i * len], len)) : "");
  }
  return out;
}

std::string File::attr_string(const std::string& obj, const std::string& name) const {
  auto v = attr_strings(obj, name);
  if (v.size() != 1) throw Error(cat(where(obj), ": attribute '", name, "' is not a single string"));
  return v[0];
}
int64_t File::attr_int(const std::string& obj, const std::string& name) const {
  auto v = attr_ints(obj, name);
  if (v.size() != 1) throw Error(cat(where(obj), ": attribute '", name, "' is not a single number"));
  return v[0];
}
double File::attr_double(const std::string& obj, const std::string& name) const {
  auto v = attr_doubles(obj, name);
  if (v.size() != 1) throw Error(cat(where(obj), ": attribute '", name, "' is not a single number"));
  return v[0];
}
std::vector<double> File::attr_doubles(const std::string& obj, const std::string& name) const {
  Handle o = open_object(obj);
  return read_numeric_attr<double>(o.get(), name, where(obj));
}
std::vector<int64_t> File::attr_ints(const std::string& obj, const std::string& name) const {
  Handle o = open_object(obj);
  return read_numeric_attr<int64_t>(o.get(), name, where(obj));
}

void File::flush() {
  check_status(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), cat(path_, ": flush failed (disk full?)"));
}

File::~File() {
  if (parallel_ && std::uncaught_exceptions() > 0) (void)file_.release();
}

void File::close() {
  if (!file_) return;
  // Close explicitly so that a failing final write (disk full) is reported, not swallowed.
  // release() first: closing the id a second time after a failed close crashed libhdf5.
  herr_t rc = H5Fclose(file_.release());
  if (rc < 0) throw Error(cat(path_, ": close failed (disk full or I/O error?)"));
}

void stamp(File& f, const std::string& schema, const std::string& config_yaml) {
  f.set_attr("/", "schema", schema);
  f.set_attr("/", "sieve_version", std::string(SIEVE_VERSION));
  f.set_attr("/", "config", config_yaml);
}

void require_schema(const File& f, const std::string& schema) {
  if (!f.has_attr("/", "schema"))
    throw Error(cat(f.path(), ": not a Sieve file (no 'schema' attribute; expected '", schema, "')"));
  std::string found = f.attr_string("/", "schema");
  if (found != schema)
    throw Error(cat(f.path(), ": schema is '", found, "', expected '", schema, "'"));
}

#define SIEVE_H5_INSTANTIATE(T)                                                              \
  template void File::create_dataset<T>(const std::string&, const std::vector<hsize_t>&, hsize_t); \
  template void File::write_rows<T>(const std::string&, hsize_t, hsize_t, const T*);        \
  template void File::read_rows<T>(const std::string&, hsize_t, hsize_t, T*) const;         \
  template std::vector<T> File::read_all<T>(const std::string&) const;                      \
  template void File::write_small<T>(const std::string&, const std::vector<hsize_t>&,       \
                                     const std::vector<T>&);                                \
  template std::vector<hsize_t> File::require<T>(const std::string&, int) const;
SIEVE_H5_INSTANTIATE(uint8_t)
SIEVE_H5_INSTANTIATE(int8_t)
SIEVE_H5_INSTANTIATE(int32_t)
SIEVE_H5_INSTANTIATE(int64_t)
SIEVE_H5_INSTANTIATE(float)
SIEVE_H5_INSTANTIATE(double)

}  // namespace sieve::h5

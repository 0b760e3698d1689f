#include "comm/h5_mpio.hpp"

namespace sieve {

void set_fapl_mpio(hid_t fapl, const Comm& comm) {
  if (H5Pset_fapl_mpio(fapl, comm.raw(), MPI_INFO_NULL) < 0)
    throw Error(cat("HDF5: cannot set MPI-IO file access on ", comm.size(), " ranks"));
}

}  // namespace sieve

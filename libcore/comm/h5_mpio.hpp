// Parallel HDF5's one MPI seam: a file-access property list opened through MPI-IO on a
// communicator. io/h5.cpp calls this rather than naming the MPI handle itself, so that
// MPI stays inside libcore/comm.
#pragma once
#include <hdf5.h>

#include "comm/comm.hpp"

namespace sieve {

// Sets `fapl` (a file-access property list) to MPI-IO on `comm`: every rank of `comm` then
// opens or creates the file together (collective). Throws an Error naming HDF5 on failure.
void set_fapl_mpio(hid_t fapl, const Comm& comm);

}  // namespace sieve

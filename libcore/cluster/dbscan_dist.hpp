// DBSCAN of one point set spread over MPI ranks (the HPDBSCAN pattern), exact.
//
//  1. every rank keys its points on the global eps grid; sampled keys pick splitters so
//     that each rank owns a contiguous range of cells (a cell is never split);
//  2. Alltoallv moves each point to the owner of its cell;
//  3. each rank also receives the halo: points of other ranks whose cells lie within the
//     3^d neighbourhood key span (Grid::reach) of its own cell range, so every owned point
//     sees all of its eps-neighbours;
//  4. owners decide core flags of their points; halo points get theirs from their owners;
//  5. local union-find over core points (owned + halo); each local set is labelled by its
//     smallest global id; owners send the labels of their halo points, the (local label,
//     owner label) pairs are allgathered and merged, so a cluster that crosses rank
//     boundaries gets one label: the smallest global id of its core points;
//  6. borders take the label of their core neighbour with the smallest global id; clusters
//     are numbered by their smallest core id and the labels go back to the input layout.
// With global ids = row index of the concatenated input, the result equals dbscan() on
// the concatenation exactly (same noise, cores, borders and cluster numbers) for any
// number of ranks.
#pragma once
#include <cstdint>

#include "cluster/dbscan.hpp"
#include "comm/comm.hpp"

namespace sieve::cluster {

// `points` [n_local, d] and `gid` [n_local] are this rank's share (gids unique over ranks).
// Collective over `comm`. Returns labels and core flags for this rank's rows, in order;
// num_clusters and num_noise are global totals. `index_bits` as in dbscan(), applied to
// each rank's owned + halo points (0: by their count; ranks may differ).
DbscanResult dbscan_distributed(const Comm& comm, const float* points, const int64_t* gid,
                                int64_t n_local, int d, const DbscanParams& p, int index_bits = 0);

}  // namespace sieve::cluster

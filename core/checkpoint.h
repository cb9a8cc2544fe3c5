#pragma once
// Training checkpoints: everything a data-parallel run needs to continue as if it had never
// stopped (bitwise: same parameters, same losses, same samples), in one .hddp tensor file
// (core/serialize.h, file format version 1, FNV-1a 64 checksum, written atomically: temporary
// file, fsync, rename, directory fsync). Rank 0 writes it after gathering the other ranks'
// state.
//
// Files. A checkpoint at PATH lives in up to three files beside each other:
//   PATH           the newest checkpoint
//   PATH.prev      the one before it (previous_checkpoint): each save renames PATH there once
//                  the new file is complete on disk, then renames the new file to PATH. At every
//                  instant PATH or PATH.prev is a complete checkpoint (between the two renames
//                  only PATH.prev is), so a crash, kill -9 or power loss during a save leaves
//                  one to resume from (train/run_file.h falls back to PATH.prev, with a
//                  warning naming both, when PATH is missing, truncated or fails its checksum).
//   PATH.tmp.<pid> the save under way, created exclusively (O_EXCL | O_NOFOLLOW: a link
//                  planted at that name is never followed); a killed writer's is removed by
//                  the next save and when a run starts (remove_stale_temporaries).
//
// Contents. What save_state writes:
//   tensors   one per model parameter ("0.weight", "0.bias", ...; name and shape), then one
//             "optim.<buffer>" (1 x n) per optimizer state buffer (Adam: exp_avg, exp_avg_sq;
//             SGD with momentum: momentum_buffer)
//   metadata  "hddp.optim.kind" (text: adam | adamw | sgd), "hddp.optim.steps" (u64: Adam's t)
// plus these metadata entries (u64 values as encode_u64s: 8 bytes little-endian each):
//   key              value
//   ckpt.version     u64 = kCheckpointVersion (2): the layout of the ckpt.* entries below
//   ckpt.step        u64 S: training steps completed; training continues with step S (0-based).
//                    The program says what a step is (an epoch, or one batch per rank).
//   ckpt.world_size  u64 P in [1, kMaxWorldSize]: ranks of the run that wrote it
//   ckpt.rng         0 or 4P u64: each rank's RNG state (xoshiro256**, Rng::state()), rank 0
//                    first, never all zero; empty when the program keeps no per-rank stream
//   ckpt.id.<name>   text: the run's identity (model layers, optimizer and its settings, batch
//                    size, seed, data...; the program chooses the names). A resume must present
//                    exactly the same set, and the same P.
//   ckpt.rec.<name>  bytes: the program's own records (a loss history, its metrics so far);
//                    returned as they were saved, never compared.
// Readers ignore other "ckpt." keys, so a later version can add entries; a change to the
// meaning of these is a new ckpt.version, which this build refuses (version 1, which stored
// epochs and a loss history of its own, included).
//
// Errors: read_checkpoint, parse_checkpoint and restore_checkpoint throw hddp::Error (kernels/check.h) naming
// the file and the problem, for any file that is not a well-formed version-2 checkpoint: not
// an .hddp file, truncated, trailing bytes, checksum mismatch, unknown file or checkpoint
// version, missing or malformed ckpt.* entries, parameters or optimizer state that do not
// match the model. They never write the file, and restore_checkpoint changes nothing unless
// everything matches. These two functions throw nothing else for any file contents
// (a fuzz test feeds them thousands of mutated files).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/core/arena.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/serialize.h>

namespace hddp {

inline constexpr uint64_t kCheckpointVersion = 2;
inline constexpr int kMaxWorldSize = 1 << 20;

// The training state a checkpoint holds besides parameters and optimizer state.
struct TrainState {
  int64_t step = 0;                              // steps completed
  int world_size = 1;                            // P
  std::vector<Rng::State> rng;                   // none, or P entries (rank r's at r)
  std::map<std::string, std::string> identity;  // name -> text (stored as ckpt.id.<name>)
  std::map<std::string, std::string> records;   // name -> bytes (stored as ckpt.rec.<name>)
};

// Where the previous generation of the checkpoint at path is kept: path + ".prev".
std::string previous_checkpoint(const std::string& path);

struct CheckpointWrite {
  // Rename the file at path to previous_checkpoint(path) before the new one replaces it. Off
  // when path holds a damaged file while the .prev is the good one (a resume fell back to it):
  // the damaged file is then replaced, the good one kept.
  bool keep_previous = true;
};

// Writes params, the optimizer's state and `state` to path (atomically, the previous file kept
// as described above, stale temporaries of path removed). Throws std::invalid_argument for an
// inconsistent state (sizes, all-zero RNG state, identity names), hddp::Error if the file
// cannot be written.
void save_checkpoint(const std::string& path, const ParamArena<float>& params, Optimizer<float>& opt,
                     const TrainState& state, CheckpointWrite how = {});

struct Checkpoint {
  TensorFile file;   // parameters and optimizer state, as read
  TrainState state;  // decoded and checked ckpt.* entries
};

// Reads path and checks the file format and every ckpt.* entry (not yet the model: see
// restore_checkpoint). Throws hddp::Error as described above.
Checkpoint read_checkpoint(const std::string& path);
// The same from the file's bytes (path names it in messages). A resume reads the file once on
// rank 0 and sends the bytes to every rank; each parses and restores from the same bytes.
Checkpoint parse_checkpoint(const std::string& bytes, const std::string& path);

// What differs between a checkpoint's run and this one: "" when nothing does, else one
// "<name>: <in the checkpoint> in the checkpoint, <now> now" clause per difference, joined
// by "; " (world size first, then identity names in order; a name only one side has shows
// "(none)" on the other). Values are quoted as quote_input (core/util.h) does, cut at 1024
// bytes: a file's may be of any size.
std::string identity_diff(const TrainState& saved, int world_size, const std::map<std::string, std::string>& identity);

// Copies the checkpoint's parameters and optimizer state into params and opt after checking
// every name, shape, the optimizer kind and its buffers (load_state's checks); on any
// mismatch throws hddp::Error and changes nothing.
void restore_checkpoint(const Checkpoint& ckpt, const std::string& path, ParamArena<float>& params,
                        Optimizer<float>& opt);

}  // namespace hddp

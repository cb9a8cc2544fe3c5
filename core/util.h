#pragma once
// Small helpers the whole tree shares, each defined once here (no MPI): an atomic file write
// (keeping the previous file when asked), stale temporaries removed, a test pause point,
// a whole-file read, whether a path exists, the FNV-1a 64 hash, a median, elapsed seconds, a
// string split, overflow-checked sizes and input quoted for a message.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace hddp {

// How write_file_atomic replaces a file (the defaults: plainly).
struct AtomicWriteOptions {
  // Keep the file being replaced: it is renamed to `keep_previous` (replacing an older one)
  // once the new file is complete on disk, right before the new one is renamed into place, so
  // that at every instant `path` or `keep_previous` holds a complete file. "": not kept.
  std::string keep_previous;
  // Remove the temporaries other writers of `path` left behind (remove_stale_temporaries).
  bool remove_stale = false;
  // Called at two moments of the write, with "partial" (half the bytes are in the temporary)
  // and "rotated" (the previous file renamed, the new one not yet): test hooks (test_pause).
  std::function<void(const char* moment)> at;
};

// Writes `bytes` to `path` so that readers see the old file or the new one, never a part:
//   1. the temporary "<path>.tmp.<pid>" is created exclusively (O_CREAT | O_EXCL |
//      O_NOFOLLOW): nothing planted at that name is followed or truncated. A regular file
//      already there (a killed process of the same pid left it) is unlinked and the create
//      tried once more; anything else there (a symbolic link, a directory) is left as it is
//      and the write refused, naming it;
//   2. the bytes written (write retried on EINTR and short writes), fsync (retried on EINTR),
//      close (EINTR from close counts as closed: on Linux the descriptor is gone);
//   3. with keep_previous: rename(path, keep_previous), a missing path skipped;
//   4. rename(temporary, path), then (best effort) fsync of the directory.
// Throws hddp::Error naming the path and the failing call; the temporary is removed on failure.
void write_file_atomic(const std::string& path, const std::string& bytes, const AtomicWriteOptions& options = {});

// The temporaries a killed writer of `path` left: regular files named "<path>.tmp.<digits>",
// this process's own name excepted unless `include_own` (at start-up nothing of ours is in
// flight). Symbolic links and other kinds are never followed nor removed. Returns the names
// removed.
std::vector<std::string> remove_stale_temporaries(const std::string& path, bool include_own);

// Test hook, off unless the environment says HDDP_TEST_PAUSE="<point>:<n>:<marker file>": the
// n-th time (1-based) this process reaches test_pause(point), it writes its pid into the
// marker file (atomically) and waits, polling, until the file is removed (or the process is
// killed). Points: "checkpoint-partial", "checkpoint-rotated" (save_checkpoint's write),
// "resume-read" (RunFile::resume, rank 0, before reading), "init-read" (--init, rank 0).
void test_pause(const char* point);

// The whole file. Throws hddp::Error naming the path if it cannot be opened or read, or is not
// a regular file (a directory).
std::string read_file(const std::string& path);

// Whether `path` names anything (file, directory, ...) that stat(2) can see.
bool file_exists(const std::string& path);

// FNV-1a 64 of bytes, continuing from h (the offset basis by default).
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL);

// The median (mean of the two middle values for an even count); NaN for an empty vector.
double median(std::vector<double> v);

// Seconds on the steady clock since t0 (inline: the reducer calls it on every hook).
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The fields of `s` between the separators, empty ones kept: n separators give n + 1 fields
// ("a,,b" -> a, "", b; "a," -> a, ""), except that an empty string gives no fields at all.
std::vector<std::string> split(const std::string& s, char sep);

// Sizes read from a file are checked before they are trusted: every reader (IDX, NPY, CSV,
// checkpoints, safetensors) and numel() multiply through these. `what` names the file and the
// field ("train-images-idx3-ubyte: dimensions"); the error is an hddp::Error
// "<what>: a x b overflows (more than <limit>)".
uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& what, uint64_t limit = UINT64_MAX);
uint64_t checked_add(uint64_t a, uint64_t b, const std::string& what, uint64_t limit = UINT64_MAX);
// The product of dims (each >= 0; a negative one is an error), at most `limit`.
int64_t checked_product(const std::vector<int64_t>& dims, const std::string& what,
                        uint64_t limit = uint64_t(INT64_MAX));

// Input quoted for an error message: at most max_bytes of s between single quotes, every byte
// outside printable ASCII (and the quote and backslash) escaped as \xNN, and, when cut,
// "... (N bytes)". Messages go to every rank and to logs: a 4 GiB header is never copied whole.
std::string quote_input(std::string_view s, size_t max_bytes = 200);

// "" when a file can be created at `path` (its directory, "." for a bare name, is writable and
// searchable), else "cannot write into directory 'D': <reason>".
std::string file_creation_error(const std::string& path);

// v with every digit a double needs to read back the same ("%.17g"): identities, metadata.
std::string exact_string(double v);

}  // namespace hddp

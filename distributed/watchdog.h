#pragma once
// Stall watchdog: the step's collectives wait with a deadline; when one has waited longer than
// the timeout, the rank finds out which ranks did not arrive, says so, and ends the job.
//
// Why: a rank that hangs (a stopped process, a wedged node, a stuck file system) leaves every
// other rank waiting inside a collective forever: the job burns its whole time limit and
// nobody learns which node hung. PyTorch's collectives time out (30 min by default); Horovod's
// stall inspector names the ranks that have not joined after 60 s.
//
// How:
//   - wait() polls its request with MPI_Test instead of blocking in MPI_Wait (Open MPI's
//     MPI_Wait spins the same way, so this costs one clock read per poll).
//   - Past the timeout the rank sends a roll call to every other rank, on a private duplicate
//     of the communicator. Every rank answers roll calls while it waits in wait() (from 1 ms
//     into a wait on: short waits never probe), with where it is: epoch, collective, time
//     waited. A stalled collective holds every live rank inside wait(), so they all answer
//     within milliseconds; whoever has not answered within the grace did not arrive.
//   - If every rank answered, the rank gives the collective one more grace to complete: the
//     delay was then its own (descheduled past the timeout), not a stall.
//   - Otherwise the lowest rank that answered prints the report (stall_report below) and calls
//     MPI_Abort with the stall exit code; the other ranks that saw the stall print one line and
//     wait for that abort (answering roll calls), and report and abort themselves if it does
//     not come. Once a rank is missing from the roll call the job ends, even if the collective
//     completes meanwhile: the outcome does not depend on timing.
//   - A rank that was stopped and continued (SIGCONT, counted by a handler the watchdog
//     installs when the program has none) does not count its time stopped as waiting. If a
//     roll call is pending for it (only a timed-out wait sends one), the others timed out on
//     it and are ending the job (mpiexec continues stopped ranks before it kills them): it
//     exits without answering, so that their report names it. Otherwise nothing changes:
//     SIGCONT also comes from Slurm before SIGTERM and from suspend/resume.
// MPI calls are made by the thread that calls wait(), as every other reducer call
// (MPI_THREAD_FUNNELED or SERIALIZED suffices).
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hddp {

struct WatchdogOptions {
  double timeout_s = 300;  // a wait longer than this is a stall; 0 turns the watchdog off
  double grace_s = 5;      // how long the roll call waits for answers (capped at timeout_s)
  int exit_code = 4;       // MPI_Abort's code on a stall (the run kit's Exit::Stall, train/exit_code.h)
};

// Where a rank is: what it waits for, at which epoch, for how long. Sent as bytes in roll
// calls (every rank runs the same binary).
struct RankPosition {
  int64_t epoch = -1;
  double waited_s = 0;
  char what[64] = {0};  // "the allreduce of bucket 3"
};

// The report of a stall, as rank `me` of `size` prints it: `answered[r]` says whether rank r
// answered the roll call, `where[r]` where it was then (rank me: its own stalled wait),
// `node[r]` names each rank's node. Pure, so it is unit-tested.
std::string stall_report(int me, const std::vector<char>& answered, const std::vector<RankPosition>& where,
                         const std::vector<std::string>& node, double timeout_s, double grace_s);

class Watchdog {
 public:
  // Collective over comm (duplicates it for the roll call, gathers every rank's node name:
  // $SLURMD_NODENAME, else the host name). With timeout_s 0, wait() is MPI_Wait.
  Watchdog(MPI_Comm comm, WatchdogOptions options = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The epoch named in reports; the driver sets it at each step.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  // Text appended to the report (e.g. which checkpoint is kept), asked for on a stall only.
  void set_note(std::function<std::string()> note) { note_ = std::move(note); }

  // Waits for *req (MPI_Wait semantics). `what` names it in reports, with `index` appended
  // when >= 0 ("the allreduce of bucket" 3). Never returns on a stall: prints, MPI_Abort.
  void wait(MPI_Request* req, const char* what, int index = -1);

  bool enabled() const { return opt_.timeout_s > 0; }
  const WatchdogOptions& options() const { return opt_; }

 private:
  struct RollCall {
    std::vector<char> answered;       // per rank (this rank: 1)
    std::vector<RankPosition> where;  // what each rank that answered said
    int count = 1;                    // ranks that answered, this one included
  };
  // Asks every other rank where it is; collects answers for up to the grace.
  RollCall roll_call(const RankPosition& mine);
  void answer_roll_calls(const RankPosition& mine);
  // After a SIGCONT: ends this process if a rank timed out waiting for it (its roll call is
  // pending); otherwise returns.
  void check_after_continue();
  // A stall: the lowest rank that answered prints the report and aborts; the others exit.
  [[noreturn]] void end_job(const RollCall& rc, RankPosition mine);

  MPI_Comm parent_ = MPI_COMM_NULL;  // the job's communicator (MPI_Abort)
  MPI_Comm comm_ = MPI_COMM_NULL;    // private duplicate: roll calls never match the job's messages
  int rank_ = 0, size_ = 1;
  WatchdogOptions opt_;
  int64_t epoch_ = -1;
  std::vector<std::string> node_;  // every rank's node name
  std::function<std::string()> note_;
  int continued_seen_ = 0;          // SIGCONTs already checked
  bool sigcont_installed_ = false;  // our SIGCONT counter is installed (restored to SIG_DFL after)
};

}  // namespace hddp

#include <hddp/kernels/progress.h>

namespace hddp {
namespace {
ProgressHook g_hook = nullptr;
void* g_context = nullptr;
}  // namespace

void set_progress_hook(ProgressHook hook, void* context) {
  g_context = context;
  g_hook = hook;
}

void progress_poll() {
  if (g_hook) g_hook(g_context);
}

}  // namespace hddp

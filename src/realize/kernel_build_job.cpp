#include "realize/kernel_build_job.h"

#include "core/paths.h"
#include "realize/nvcc_command.h"
#include "realize/toolchain.h"

namespace fact::realize {

BuildJob kernel_build_job(const FamilyCandidate& c) {
  BuildJob job;
  job.id = c.config_id;
  job.source = c.kernel.text;
  job.command = nvcc_command(c.arch, "{source}", "{output}", cutlass_dir(), NvccOutput::object);
  // No relocatable device code: the object already holds the kernel's device code, so linking is a host link.
  job.link_command = {nvcc_exe(), "-shared", "{object}", "-o", "{output}"};
  job.timeout = std::chrono::seconds(900);
  return job;
}

BuildOptions kernel_build_options(unsigned workers, BuildProgressFn on_progress) {
  BuildOptions b;
  b.compiler_version = nvcc_version_text() + "\ncutlass " + cutlass_version();
  b.workers = workers;
  b.on_progress = std::move(on_progress);
  return b;
}

}  // namespace fact::realize

// `nanoforge report`'s page: one or several run directories read back (metrics.jsonl, config.toml,
// checkpoints/, core.json) and written as one self-contained HTML file — curves as inline SVG, overlaid when
// there are several runs, the configs side by side with their differences marked, checkpoints and samples.
// It is C++ so that the installed program reports on its own, with no Python environment beside it.
#pragma once

#include <string>
#include <vector>

#include "cli/report/run_records.h"

namespace nanoforge {

// The whole page.
std::string run_report_html(const std::vector<RunRecords>& runs);

}  // namespace nanoforge

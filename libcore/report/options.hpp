// The 'report' section (tools/report and its a-priori estimates): its keys, declared once
// with default, range and help; read by report/report.cpp and the section writers.
#pragma once
#include "config/config.hpp"

namespace sieve {

void add_report_keys(ConfigSchema& s);  // report.*: report and a-priori estimates

}  // namespace sieve

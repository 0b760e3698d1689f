#include "report/plot.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/atomic_output.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

namespace fs = std::filesystem;

namespace sieve::report {

std::string fmt(double v, int digits) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pct(double fraction, int decimals) {
  return std::isnan(fraction) ? "n/a" : fixed(100.0 * fraction, decimals);
}

static std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void write_csv(const std::string& path, const Row& header, const std::vector<Row>& rows) {
  std::ostringstream os;
  auto line = [&](const Row& r) {
    for (size_t i = 0; i < r.size(); ++i) os << (i ? "," : "") << csv_field(r[i]);
    os << "\n";
  };
  line(header);
  for (const Row& r : rows) {
    SIEVE_ASSERT(r.size() == header.size(), path, ": row width ", r.size(), " != ", header.size());
    line(r);
  }
  write_text_atomic(path, os.str());
}

FigureFormat parse_figure_format(const std::string& s) {
  return s == "svg" ? FigureFormat::Svg : FigureFormat::Png;
}

const char* extension(FigureFormat f) {
  return f == FigureFormat::Svg ? "svg" : "png";
}

std::string terminal_line(FigureFormat f, int width, int height) {
  if (f == FigureFormat::Svg)
    return cat("set terminal svg size ", width, ",", height,
               " enhanced font 'sans,11' background rgb 'white'\n");
  return cat("set terminal pngcairo size ", width, ",", height,
             " enhanced font 'sans,11' background rgb 'white'\n");
}

std::string gp_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

void run_gnuplot(const std::string& dir_in, const std::string& name, const std::string& script,
                 const std::string& output_rel) {
  const std::string dir = fs::absolute(dir_in).lexically_normal().string();
  fs::create_directories(dir + "/gnuplot");
  const std::string gp = "gnuplot/" + name + ".gp", log = dir + "/gnuplot/" + name + ".log";
  write_text_atomic(dir + "/" + gp, script);
  // The script uses paths relative to the report directory, so gnuplot runs there; started
  // from an argument vector, never through a shell (the directory may hold any byte).
  const int code = run_process({"gnuplot", gp}, {dir, log});
  std::string tail;
  {
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line))
      tail = (tail.size() > 600 ? tail.substr(tail.size() - 600) : tail) + line + " | ";
  }
  if (code == 127) throw Error("gnuplot not found (install Debian's gnuplot-nox)");
  SIEVE_CHECK(code == 0, dir, "/", gp, ": gnuplot failed (exit ", code, "): ", tail);
  const std::string out = dir + "/" + output_rel;
  SIEVE_CHECK(fs::exists(out) && fs::file_size(out) > 0, dir, "/", gp,
              ": gnuplot produced no output ", output_rel, " ", tail);
  // The log is only kept when it says something (warnings about the data, say).
  if (fs::exists(log) && fs::file_size(log) == 0) fs::remove(log);
}

}  // namespace sieve::report

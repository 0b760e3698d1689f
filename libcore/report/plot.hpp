// CSV tables and gnuplot figures for the report.
//
// Every figure is made from a CSV file written first (the numbers behind the figure travel
// with it) by a generated gnuplot script kept next to it (gnuplot/<name>.gp), so a figure
// can be restyled by editing the script and re-running `gnuplot` in the report directory.
// gnuplot runs as a child process in the report directory; a non-zero exit status or a
// missing/empty output is an Error carrying the tail of gnuplot's stderr.
#pragma once
#include <string>
#include <vector>

#include "util/error.hpp"

namespace sieve::report {

using Row = std::vector<std::string>;

// "%.*g" with `digits` significant digits; NaN -> "" (a missing value for gnuplot and CSV).
std::string fmt(double v, int digits = 6);
// Fixed decimals (tables): NaN -> "n/a".
std::string fixed(double v, int decimals);
// Percent of a fraction with `decimals` decimals: 0.8321 -> "83.21"; NaN -> "n/a".
std::string pct(double fraction, int decimals = 2);

// RFC 4180-ish CSV: fields with a comma, quote or newline are quoted.
void write_csv(const std::string& path, const Row& header, const std::vector<Row>& rows);

enum class FigureFormat { Png, Svg };
FigureFormat parse_figure_format(const std::string& s);
const char* extension(FigureFormat f);
// `set terminal ...` line for the format and size in pixels.
std::string terminal_line(FigureFormat f, int width, int height);

// Quote a string for gnuplot (single quotes; embedded ones doubled).
std::string gp_quote(const std::string& s);

// Write `script` to <dir>/gnuplot/<name>.gp, run gnuplot in <dir>, check it produced
// <dir>/<output_rel> non-empty. Throws Error on failure.
void run_gnuplot(const std::string& dir, const std::string& name, const std::string& script,
                 const std::string& output_rel);

}  // namespace sieve::report

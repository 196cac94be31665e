/* Declarations that LAMMPS's own headers need from fmt, for builds against a LAMMPS install
 * that lacks the fmt headers LAMMPS bundles (Debian 12's liblammps-dev: its utils.h and
 * error.h include "fmt/format.h", which the package does not ship).
 *
 * Those headers only name three fmt entities, in declarations of LAMMPS's fmt-based message
 * overloads. The plugin never calls those overloads (it passes std::string messages, which
 * select LAMMPS's plain overloads), so declarations suffice. They live in the inline namespace
 * of the fmt copy inside Debian's liblammps (fmt::v7_lmp): any call that slipped in would
 * fail to link (the Makefile links with --no-undefined) rather than reach a different fmt.
 * A LAMMPS install that ships its fmt headers is found first on the include path. */
#ifndef MPCBOX_COMPAT_FMT_FORMAT_H
#define MPCBOX_COMPAT_FMT_FORMAT_H

namespace fmt {
inline namespace v7_lmp {
template <typename Char> class basic_string_view;
using string_view = basic_string_view<char>;
class format_args;
template <typename... Args, typename S, typename... T>
void make_args_checked(const S &format, const T &...args);
}    // namespace v7_lmp
}    // namespace fmt

#endif

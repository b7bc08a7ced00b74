// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// The size of the terminal the umemcg tool writes to (stdout), for the
// views fitted to it: `top`, `cluster top` and `cluster tree`.
//
// Thread safety: a plain function (it reads the environment).

#ifndef UMEMCG_TOOLS_TERMINAL_H_
#define UMEMCG_TOOLS_TERMINAL_H_

#include <cstddef>

namespace umemcg::cli {

struct TerminalSize {
  size_t rows;
  size_t cols;
};

// The size stdout's terminal reports (TIOCGWINSZ); a dimension it does not
// report (stdout is no terminal, or the terminal says 0) is `fallback`'s.
// With `columns_env`, a positive integer in $COLUMNS is the width,
// whatever the terminal says.
TerminalSize ReadTerminalSize(TerminalSize fallback, bool columns_env = false);

}  // namespace umemcg::cli

#endif  // UMEMCG_TOOLS_TERMINAL_H_

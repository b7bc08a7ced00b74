// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>

namespace umemcg::cli {

TerminalSize ReadTerminalSize(TerminalSize fallback, bool columns_env) {
  TerminalSize size = fallback;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
    if (ws.ws_row > 0) size.rows = ws.ws_row;
    if (ws.ws_col > 0) size.cols = ws.ws_col;
  }
  if (columns_env) {
    if (const char* env = std::getenv("COLUMNS")) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(env, &end, 10);
      if (end != env && *end == 0 && v > 0) size.cols = v;
    }
  }
  return size;
}

}  // namespace umemcg::cli

// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// A program linked against the installed jemalloc component: operator new
// inside a scope is charged to the group, and refused at its max.

#include "umemcg/jemalloc.h"

#include <cstdio>
#include <memory>
#include <new>
#include <vector>

#include "umemcg/active.h"
#include "umemcg/umemcg.h"

int main() {
  auto ctrl = umemcg::Controller::Create({}).value();
  if (!umemcg::jemalloc::Enable(*ctrl).ok()) return 1;
  umemcg::GroupRef g = ctrl->CreateGroup(ctrl->root(), "t").value();
  if (!g->SetMax(umemcg::Pages(256)).ok()) return 2;
  std::vector<std::unique_ptr<char[]>> held;
  held.reserve(1000);
  bool threw = false;
  {
    umemcg::ActiveGroupScope scope(*g);
    try {
      for (int i = 0; i < 1000; ++i) held.emplace_back(new char[4000]);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
  }
  const size_t n = held.size();
  held.clear();
  umemcg::jemalloc::Disable();
  std::printf("jemalloc consumer: %zu blocks before bad_alloc\n", n);
  return threw && n > 0 && n * 4000 <= (1u << 20) ? 0 : 3;
}

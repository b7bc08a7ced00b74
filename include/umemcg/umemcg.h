// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Umbrella header. From C: the C API (umemcg/c.h). From C++: the C API and
// the whole public C++ API.

#ifndef UMEMCG_UMEMCG_H_
#define UMEMCG_UMEMCG_H_

#include "umemcg/c.h"  // IWYU pragma: export

#ifdef __cplusplus
#include "umemcg/clock.h"         // IWYU pragma: export
#include "umemcg/controller.h"    // IWYU pragma: export
#include "umemcg/cpu.h"           // IWYU pragma: export
#include "umemcg/events.h"        // IWYU pragma: export
#include "umemcg/files.h"         // IWYU pragma: export
#include "umemcg/group.h"         // IWYU pragma: export
#include "umemcg/heap_profile.h"  // IWYU pragma: export
#include "umemcg/obj_cgroup.h"    // IWYU pragma: export
#include "umemcg/page_counter.h"  // IWYU pragma: export
#include "umemcg/pressure.h"      // IWYU pragma: export
#include "umemcg/stats.h"         // IWYU pragma: export
#include "umemcg/status.h"        // IWYU pragma: export
#include "umemcg/units.h"         // IWYU pragma: export
#endif

#endif  // UMEMCG_UMEMCG_H_

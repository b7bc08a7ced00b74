// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Must not compile (ctest: objcg_raw_ref_does_not_compile): taking an
// ObjCgroupRef from a group's bare objcg pointer races with RemoveGroup
// (the objcg can be freed between the load and the reference), so the
// bare pointer is not part of the public API. With
// -DUMEMCG_COMPILE_FAIL_CONTROL the safe form is compiled instead, which
// must succeed (objcg_safe_ref_compiles): the failure above is then due to
// the unsafe form, not to the test's setup.

#include "umemcg/umemcg.h"

umemcg::ObjCgroupRef Take(umemcg::Group& g) {
#ifdef UMEMCG_COMPILE_FAIL_CONTROL
  return g.GetObjCgroup();
#else
  return umemcg::ObjCgroupRef(g.objcg());
#endif
}

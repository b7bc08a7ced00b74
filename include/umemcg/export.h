// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// UMEMCG_EXPORT marks the public API. The library is built with
// -fvisibility=hidden, so libumemcg.so exports only what is marked.

#ifndef UMEMCG_EXPORT_H_
#define UMEMCG_EXPORT_H_

#define UMEMCG_EXPORT [[gnu::visibility("default")]]

#endif  // UMEMCG_EXPORT_H_

/* Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
 *
 * A plain C program for preload_profile_test.sh: 30 MiB from tenant_a_work,
 * 10 MiB from tenant_b_work, held until exit (64 KiB blocks, malloc);
 * with PROFILE_TARGET_SIGNAL set it raises SIGUSR2 between the two. */

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK (64 * 1024)

static void* held[1024];
static int nheld;

__attribute__((noinline)) void tenant_a_work(void) {
  for (int i = 0; i < (30 << 20) / BLOCK; ++i) {
    held[nheld] = malloc(BLOCK);
    memset(held[nheld++], 1, 64);
  }
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void tenant_b_work(void) {
  for (int i = 0; i < (10 << 20) / BLOCK; ++i) {
    held[nheld] = malloc(BLOCK);
    memset(held[nheld++], 1, 64);
  }
  __asm__ volatile("" ::: "memory");
}

int main(void) {
  tenant_a_work();
  /* With PROFILE_TARGET_SIGNAL: ask for a profile between the two. */
  if (getenv("PROFILE_TARGET_SIGNAL") != NULL) raise(SIGUSR2);
  tenant_b_work();
  return held[0] == NULL;
}

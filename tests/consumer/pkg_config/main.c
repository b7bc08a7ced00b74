/* A C program built with a plain compiler line from
 * `pkg-config --cflags --libs umemcg` (tests/consumer/consumer_test.sh). */

#include <stdio.h>
#include <string.h>

#include "umemcg/umemcg.h"

int main(void) {
  umemcg_controller_t* ctrl = NULL;
  umemcg_group_t* root = NULL;
  umemcg_group_t* tenant = NULL;
  char buf[64];
  int err = umemcg_controller_create(NULL, &ctrl);
  if (err == 0) err = umemcg_group_root(ctrl, &root);
  if (err == 0) err = umemcg_group_create(root, "tenant", &tenant);
  if (err == 0) err = umemcg_write_file(tenant, "memory.max", "1M");
  if (err == 0) err = umemcg_try_charge(tenant, 3, 0, NULL);
  if (err == 0) err = umemcg_uncharge_direct(tenant, 3);
  if (err == 0) {
    err = umemcg_read_file(tenant, "memory.max", buf, sizeof(buf), NULL);
  }
  if (err != 0) {
    fprintf(stderr, "FAILED: %s\n", umemcg_strerror(err));
    return 1;
  }
  if (strcmp(buf, "1048576\n") != 0) {
    fprintf(stderr, "FAILED: memory.max reads '%s'\n", buf);
    return 1;
  }
  if (umemcg_try_charge(tenant, 1000, 0, NULL) == 0) {
    fprintf(stderr, "FAILED: a charge over memory.max succeeded\n");
    return 1;
  }
  umemcg_group_release(tenant);
  umemcg_group_release(root);
  umemcg_controller_destroy(ctrl);
  printf("consumer (pkg-config, C): ok\n");
  return 0;
}

// The README's example: a tenant with a 1 MiB limit, charged page by page.
#include <cstdio>

#include "umemcg/umemcg.h"

using umemcg::Controller;
using umemcg::Pages;

int main() {
  auto ctrl = Controller::Create({.batch = 64}).value();
  umemcg::GroupRef tenant = ctrl->CreateGroup(ctrl->root(), "tenant").value();
  if (!tenant->SetMax(Pages(256)).ok()) return 1;  // 1 MiB

  int charged = 0;
  while (tenant->TryCharge(Pages(1), umemcg::kChargeDefault).ok()) ++charged;
  std::printf("charged %d pages; usage %llu, max events %llu\n", charged,
              static_cast<unsigned long long>(tenant->usage().raw()),
              static_cast<unsigned long long>(
                  tenant->events(umemcg::MemoryEvent::kMax)));
  tenant->Uncharge(Pages(static_cast<uint64_t>(charged)));
  ctrl->DrainAllStocks(*tenant);
  std::printf("after uncharge: usage %llu\n",
              static_cast<unsigned long long>(tenant->usage().raw()));
  return 0;
}

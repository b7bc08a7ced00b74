// The README's example (kept identical; built by CMake).
#include <cstdio>

#include "umemcg/umemcg.h"
using umemcg::Pages;

int main() {
  auto ctrl = umemcg::Controller::Create({.batch = 64}).value();
  umemcg::GroupRef tenant = ctrl->CreateGroup(ctrl->root(), "tenant").value();
  if (!tenant->SetMax(Pages(256)).ok()) return 1;  // 1 MiB hard limit
  (void)tenant->SetHigh(Pages(192));               // throttle above 768 KiB

  // Charge 3 pages; usually served from this CPU's stock (no shared write).
  umemcg::ChargeResult r = tenant->TryCharge(Pages(3));
  if (!r.ok()) {
    // r.code == kResourceExhausted; r.limited_by names the refusing group.
    return 1;
  }
  tenant->Uncharge(Pages(3));  // back through the stock

  // usage counts the pages pre-charged in per-CPU stocks (<= nr_cpus x 64).
  std::printf("usage %llu pages, %llu of them in stocks\n",
              (unsigned long long)tenant->usage().raw(),
              (unsigned long long)tenant->StockedPages().raw());
  return 0;
}

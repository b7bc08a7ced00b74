// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Attachment: the common lifetime of a service attached to a Controller (a
// FUSE mount, a metrics server). The service must stop when its handle is
// destroyed or when the controller is, whichever comes first:
//   handle first      Stop(), then detach from the controller;
//   controller first  OnControllerDestroy() runs Stop() on the destroying
//                     thread; the handle later finds it detached.
// Subclasses implement DoStop(): stop serving, wait for every thread that
// may touch the controller, release every GroupRef. It runs once.
//
// Thread safety: Stop and Detach may be called from any thread.
// Destroying the controller while a handle is being destroyed on another
// thread violates the controller's contract (no other thread uses it).

#ifndef UMEMCG_OPS_ATTACHMENT_H_
#define UMEMCG_OPS_ATTACHMENT_H_

#include <memory>
#include <mutex>

#include "umemcg/controller.h"

namespace umemcg::internal {

class Attachment : public ControllerObserver {
 public:
  explicit Attachment(Controller& controller) : controller_(&controller) {}

  // Registers `self` with the controller. REQUIRES: self.get() == this.
  void Attach(const std::shared_ptr<Attachment>& self) {
    controller_->AddObserver(self);
  }

  // Stops the service (once; later calls wait for the first to finish).
  void Stop() {
    std::call_once(stopped_, [this] { DoStop(); });
  }

  // From the handle's destructor: stop, then leave the controller's list.
  void StopAndDetach() {
    Stop();
    std::lock_guard<std::mutex> lock(mu_);
    if (controller_ != nullptr) controller_->RemoveObserver(this);
    controller_ = nullptr;
  }

  void OnControllerDestroy() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      controller_ = nullptr;
    }
    Stop();
  }

 protected:
  virtual void DoStop() = 0;

 private:
  std::once_flag stopped_;
  std::mutex mu_;
  Controller* controller_;  // guarded by mu_; null once detached
};

}  // namespace umemcg::internal

#endif  // UMEMCG_OPS_ATTACHMENT_H_

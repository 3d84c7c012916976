// ESP only: a push button on a GPIO (active low, internal pull-up), debounced,
// calling back on a task of its own (never from the interrupt). The callback
// should hand work to another task: this one has a 2 KB stack.
#pragma once

#include <functional>

class Button {
 public:
  Button(int gpio, std::function<void()> on_press);
  bool Start();

 private:
  static void Task(void* self);
  int gpio_;
  std::function<void()> on_press_;
  void* queue_ = nullptr;
};

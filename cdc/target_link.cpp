#include "cdc/target_link.hpp"

namespace flotilla::cdc {
namespace {

class borrowed final : public sinks::warehouse {
 public:
  explicit borrowed(sinks::warehouse& w) : w_(w) {}
  [[nodiscard]] const dialects::dialect& dialect() const override { return w_.dialect(); }
  [[nodiscard]] std::optional<schema::table_schema> describe(
      const dialects::table_ref& table) override {
    return w_.describe(table);
  }
  void execute(const std::vector<std::string>& statements) override { w_.execute(statements); }
  [[nodiscard]] std::unique_ptr<sinks::table_writer> begin_load(
      const sinks::load_request& request) override {
    return w_.begin_load(request);
  }
  [[nodiscard]] std::optional<std::string> committed_token(
      const dialects::table_ref& table) override {
    return w_.committed_token(table);
  }
  [[nodiscard]] std::vector<std::vector<std::optional<std::string>>> query(
      const std::string& sql) override {
    return w_.query(sql);
  }

 private:
  sinks::warehouse& w_;
};

}  // namespace

std::unique_ptr<sinks::warehouse> borrow(sinks::warehouse& owner) {
  return std::make_unique<borrowed>(owner);
}

}  // namespace flotilla::cdc

// The cdc module's anchor translation unit (the library always has one object).
namespace flotilla::cdc {
int module_anchor = 0;
}  // namespace flotilla::cdc

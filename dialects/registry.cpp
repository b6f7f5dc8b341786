#include "dialects/dialect.hpp"

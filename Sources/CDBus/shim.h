#ifndef KEYBOUND_CDBUS_SHIM_H
#define KEYBOUND_CDBUS_SHIM_H
#include <dbus/dbus.h>

// The type codes are cast macros (`((int) 's')`), which Swift does not import; these copies are
// the same values under the header's own names.
static const int keybound_dbus_type_invalid = DBUS_TYPE_INVALID;
static const int keybound_dbus_type_byte = DBUS_TYPE_BYTE;
static const int keybound_dbus_type_boolean = DBUS_TYPE_BOOLEAN;
static const int keybound_dbus_type_string = DBUS_TYPE_STRING;
static const int keybound_dbus_type_object_path = DBUS_TYPE_OBJECT_PATH;
static const int keybound_dbus_type_array = DBUS_TYPE_ARRAY;
static const int keybound_dbus_type_variant = DBUS_TYPE_VARIANT;
static const int keybound_dbus_type_struct = DBUS_TYPE_STRUCT;
static const int keybound_dbus_type_dict_entry = DBUS_TYPE_DICT_ENTRY;
#endif

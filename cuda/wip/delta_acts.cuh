typedef struct mn__cm_delta_acts { float* unused; } mn__cm_delta_acts;
typedef struct mn__cm_delta_dacts { float* unused; } mn__cm_delta_dacts;

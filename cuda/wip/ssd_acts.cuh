typedef struct mn__cm_ssd_acts { float* unused; } mn__cm_ssd_acts;
typedef struct mn__cm_ssd_dacts { float* unused; } mn__cm_ssd_dacts;

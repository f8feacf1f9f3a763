/* Plant model of the simulated bench (see plant.h). */
#include "plant.h"

#include <math.h>

struct plant_params plant_default_params(void)
{
    struct plant_params p = {
        .inertia_kg_m2 = 1.0,
        .viscous_nm_s_per_rad = 1.0,
        .coulomb_nm = 2.0,
        .torque_limit_nm = 150.0,
        .gravity_moment_nm = 0.0,
        .encoder_counts = 131072,
        .initial_position_rad = 0.0,
        .substeps = 4,
    };
    return p;
}

void plant_init(struct plant *plant, struct plant_params params)
{
    plant->p = params;
    plant->position_rad = params.initial_position_rad;
    plant->velocity_rad_s = 0.0;
    plant->applied_torque_nm = 0.0;
    plant->external_torque_nm = 0.0;
}

double plant_implicit_velocity(double inertia, double viscous, double coulomb, double velocity,
                               double torque, double dt_s)
{
    double drive = inertia / dt_s * velocity + torque; /* momentum-like term of the step */
    if (fabs(drive) <= coulomb) {
        return 0.0;
    }
    double friction = drive > 0.0 ? coulomb : -coulomb;
    return (drive - friction) / (inertia / dt_s + viscous);
}

void plant_step(struct plant *plant, double torque_command_nm, double dt_s)
{
    double limit = plant->p.torque_limit_nm;
    double torque = fmax(-limit, fmin(limit, torque_command_nm));
    plant->applied_torque_nm = torque;
    double h = dt_s / plant->p.substeps;
    for (int i = 0; i < plant->p.substeps; i++) {
        /* Gravity explicit (smooth and slow); friction implicit (stiff and set-valued). */
        double total = torque + plant->external_torque_nm -
                       plant->p.gravity_moment_nm * sin(plant->position_rad);
        plant->velocity_rad_s = plant_implicit_velocity(
            plant->p.inertia_kg_m2, plant->p.viscous_nm_s_per_rad, plant->p.coulomb_nm,
            plant->velocity_rad_s, total, h);
        plant->position_rad += h * plant->velocity_rad_s;
    }
}

int32_t plant_encoder_urad(const struct plant *plant)
{
    const double two_pi = 6.283185307179586;
    double counts = floor(plant->position_rad / two_pi * plant->p.encoder_counts);
    return (int32_t)lround(counts * two_pi / plant->p.encoder_counts * 1e6);
}
